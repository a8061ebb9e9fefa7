// Package adapt makes a client-go clientset a kubeclient.Interface: the
// operator's commands, which hold a kubernetes.Interface, and the tests,
// which hold client-go's fake, pass it where the agent's code takes a
// kubeclient.Interface. The agent itself never imports this package (it
// would link k8s.io/client-go/kubernetes/scheme, see package kubeclient).
package adapt

import (
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/watchlist"

	"github.com/kubectl-dkc/dkc/pkg/kubeclient"
)

// Clientset returns cs as a kubeclient.Interface.
func Clientset(cs kubernetes.Interface) kubeclient.Interface {
	return clientset{cs: cs}
}

type clientset struct {
	cs kubernetes.Interface
}

func (c clientset) Nodes() kubeclient.NodeClient { return c.cs.CoreV1().Nodes() }

func (c clientset) ConfigMaps(namespace string) kubeclient.ConfigMapClient {
	return c.cs.CoreV1().ConfigMaps(namespace)
}

func (c clientset) Pods(namespace string) kubeclient.PodClient {
	return c.cs.CoreV1().Pods(namespace)
}

func (c clientset) PodTemplates(namespace string) kubeclient.PodTemplateClient {
	return c.cs.CoreV1().PodTemplates(namespace)
}

func (c clientset) Leases(namespace string) kubeclient.LeaseClient {
	return c.cs.CoordinationV1().Leases(namespace)
}

func (c clientset) Events(namespace string) kubeclient.EventClient {
	return c.cs.CoreV1().Events(namespace)
}

// IsWatchListSemanticsUnSupported passes on what cs says: client-go's fake
// clientset cannot stream a watch list, so informers on it list and watch.
func (c clientset) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(c.cs)
}
