package status

import (
	"context"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
)

// CompleteNodeNames completes NODE arguments with the names of the nodes,
// leaving out those already given. assign and reset use it too.
func CompleteNodeNames(f genericclioptions.RESTClientGetter) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		client, err := util.Client(f)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		list, err := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		given := map[string]bool{}
		for _, a := range args {
			given[a] = true
		}
		var names []cobra.Completion
		for _, n := range list.Items {
			if !given[n.Name] {
				names = append(names, n.Name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
