// Package kubeclient is the node agent's API client: typed clients for
// exactly the resources the agent reads and writes (Nodes, ConfigMaps, the
// node's Pods and Lease, its probe pod and that pod's PodTemplate, Events),
// built with client-go's gentype over a scheme that holds only core/v1 and
// coordination.k8s.io/v1.
//
// It exists for the agent's memory. client-go's clientset, and every
// package under k8s.io/client-go/kubernetes/typed, imports
// k8s.io/client-go/kubernetes/scheme, whose init registers every API group
// and keeps their pages resident: about 9 MiB of the slim agent's idle RSS
// (docs/performance.md). The agent's import graph must never reach it;
// cmd/kubectl-dkc-agent's TestLinksOnlyTheAgent checks that.
//
// The interfaces here are declared by the agent, narrow enough that the
// clientset's typed clients satisfy them too: the operator's commands and
// the tests pass a clientset through package adapt.
package kubeclient

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// NodeClient is the Node requests the agent makes.
type NodeClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error)
}

// ConfigMapClient is the ConfigMap requests the agent makes in one
// namespace.
type ConfigMapClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.ConfigMapList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// PodClient lists and watches Pods; the agent asks only for those bound to
// its node (a spec.nodeName field selector). It creates, reads and deletes
// only its probe pod, in its own namespace (probepod.go in package agent).
type PodClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error)
	Create(ctx context.Context, pod *corev1.Pod, opts metav1.CreateOptions) (*corev1.Pod, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// PodTemplateClient reads PodTemplates in one namespace: the agent's probe
// pod's.
type PodTemplateClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.PodTemplate, error)
}

// LeaseClient reads Leases in one namespace.
type LeaseClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
}

// EventClient writes Events in one namespace.
type EventClient interface {
	Create(ctx context.Context, event *corev1.Event, opts metav1.CreateOptions) (*corev1.Event, error)
	Update(ctx context.Context, event *corev1.Event, opts metav1.UpdateOptions) (*corev1.Event, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Event, error)
}

// Interface is the agent's API client. An informer built on it passes the
// Interface to cache.ToListWatcherWithWatchListSemantics, as client-go's
// informers pass the clientset: an Interface that cannot stream a watch
// list (client-go's fake) says so with IsWatchListSemanticsUnSupported.
type Interface interface {
	Nodes() NodeClient
	ConfigMaps(namespace string) ConfigMapClient
	Pods(namespace string) PodClient
	PodTemplates(namespace string) PodTemplateClient
	Leases(namespace string) LeaseClient
	Events(namespace string) EventClient
}
