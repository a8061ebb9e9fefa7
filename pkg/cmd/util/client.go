package util

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubectl-dkc/dkc/pkg/kubeclient"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// Client builds a clientset from kubectl's global flags.
func Client(f genericclioptions.RESTClientGetter) (kubernetes.Interface, error) {
	cfg, err := f.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return NewClientset(cfg)
}

// NewClientset builds a clientset over cfg that speaks protobuf for the
// built-in types (kubeclient.Protobuf), as kube-controller-manager's do.
func NewClientset(cfg *rest.Config) (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(kubeclient.Protobuf(cfg))
}

// ObjectClients builds what a command that writes objects of any kind
// needs from kubectl's global flags: a clientset, a dynamic client, and a
// RESTMapper.
func ObjectClients(f genericclioptions.RESTClientGetter) (kubernetes.Interface, dynamic.Interface, meta.RESTMapper, error) {
	cfg, err := f.ToRESTConfig()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	client, err := NewClientset(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	mapper, err := f.ToRESTMapper()
	return client, dyn, mapper, err
}

// ConfigNamespace is the namespace of dkc's ConfigMaps: -n when given,
// else kube-system, as in the old documented workflow (not the kubeconfig
// context's namespace).
func ConfigNamespace(f genericclioptions.RESTClientGetter, cmd *cobra.Command) (string, error) {
	if flag := cmd.Flag("namespace"); flag != nil && flag.Changed {
		ns, _, err := f.ToRawKubeConfigLoader().Namespace()
		return ns, err
	}
	return source.DefaultNamespace, nil
}
