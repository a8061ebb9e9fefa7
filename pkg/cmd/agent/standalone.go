package agent

import (
	"flag"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/kubectl-dkc/dkc/pkg/cmd/version"
)

// RESTConfigGetter is the one thing the agent needs from kubectl's global
// flags. *genericclioptions.ConfigFlags implements it for `kubectl dkc
// agent`; KubeconfigFlags implements it for the slim kubectl-dkc-agent
// binary, which links neither cli-runtime's resource builder nor kustomize.
type RESTConfigGetter interface {
	ToRESTConfig() (*rest.Config, error)
}

// KubeconfigFlags are the connection flags of the standalone agent: a
// kubeconfig file and a context in it. With neither, the config comes as
// kubectl's does: $KUBECONFIG, ~/.kube/config, then the in-cluster
// service account of a pod.
type KubeconfigFlags struct {
	Kubeconfig string
	Context    string
}

var _ RESTConfigGetter = &KubeconfigFlags{}

// ToRESTConfig loads the REST config.
func (k *KubeconfigFlags) ToRESTConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.Kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: k.Context}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
}

// NewCmdStandalone returns the agent as a command of its own, for the
// kubectl-dkc-agent binary: the flags of `kubectl dkc agent`, plus
// --kubeconfig, --context and klog's -v, and the version command and flag
// of kubectl-dkc. Its help is the agent's: the version and help commands
// work but are not listed (--version is).
func NewCmdStandalone(streams genericiooptions.IOStreams) *cobra.Command {
	k := &KubeconfigFlags{}
	cmd := NewCmdAgent(k, streams)
	cmd.Use = "kubectl-dkc-agent --dynamic-config-dir DIR --kubelet-config PATH"
	cmd.Example = strings.ReplaceAll(cmd.Example, "kubectl dkc agent", "kubectl-dkc-agent")
	cmd.SilenceErrors = true
	cmd.CompletionOptions.DisableDefaultCmd = true
	fl := cmd.Flags()
	fl.StringVar(&k.Kubeconfig, "kubeconfig", k.Kubeconfig, "Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, else the pod's service account).")
	fl.StringVar(&k.Context, "context", k.Context, "The kubeconfig context to use.")
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fl.AddGoFlag(klogFlags.Lookup("v"))
	version.AddTo(cmd, streams)
	cmd.InitDefaultHelpCmd()
	for _, sub := range cmd.Commands() {
		sub.Hidden = true
	}
	return cmd
}
