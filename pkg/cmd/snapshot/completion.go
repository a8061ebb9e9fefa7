package snapshot

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
)

// completionTimeout bounds the API calls of shell completion.
const completionTimeout = 5 * time.Second

// NodeNameCompletion completes NODE arguments with the cluster's node names,
// leaving out those already given.
func NodeNameCompletion(f genericclioptions.RESTClientGetter) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		names := ListNodeNames(f)
		var out []cobra.Completion
		for _, n := range names {
			if strings.HasPrefix(n, toComplete) && !slices.Contains(args, n) {
				out = append(out, n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// ListNodeNames lists the cluster's node names for shell completion, or
// nothing when the cluster cannot be reached.
func ListNodeNames(f genericclioptions.RESTClientGetter) []string {
	client, err := util.Client(f)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(list.Items))
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	return names
}
