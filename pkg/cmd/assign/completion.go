package assign

import (
	"context"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// CompleteConfigMaps completes --config with the ConfigMaps dkc pushed
// (labelled source.ConfigLabel) in the config namespace.
func CompleteConfigMaps(f genericclioptions.RESTClientGetter) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		client, err := util.Client(f)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ns, err := util.ConfigNamespace(f, cmd)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		list, err := client.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{LabelSelector: source.ConfigLabel})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []cobra.Completion
		for _, cm := range list.Items {
			names = append(names, cm.Name)
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
