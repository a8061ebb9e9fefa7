package diff

import (
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
)

// completion completes A and B: node/, assigned/ and configmap/ followed by
// node names and the names of the ConfigMaps dkc pushed, or files.
func completion(f genericclioptions.RESTClientGetter) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) >= 2 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		prefix, _, found := strings.Cut(toComplete, "/")
		if !found {
			var out []cobra.Completion
			for _, p := range []string{"node/", "assigned/", "configmap/"} {
				if strings.HasPrefix(p, toComplete) {
					out = append(out, p)
				}
			}
			// Offer files too, and let the shell go on after a prefix.
			return out, cobra.ShellCompDirectiveNoSpace
		}
		var names []string
		switch prefixes[prefix] {
		case Node, Assigned:
			names = util.NodeNames(f)
		case ConfigMap:
			names = util.ConfigNames(f, cmd)
		default:
			return nil, cobra.ShellCompDirectiveDefault
		}
		var out []cobra.Completion
		for _, n := range names {
			if c := prefix + "/" + n; strings.HasPrefix(c, toComplete) {
				out = append(out, c)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
