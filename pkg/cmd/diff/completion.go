package diff

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/kubectl-dkc/dkc/pkg/cmd/snapshot"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/source"
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
			names = snapshot.ListNodeNames(f)
		case ConfigMap:
			names = listConfigNames(f, cmd)
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

// listConfigNames lists the ConfigMaps that dkc pushed to the config
// namespace, or nothing when the cluster cannot be reached.
func listConfigNames(f genericclioptions.RESTClientGetter, cmd *cobra.Command) []string {
	ns, err := util.ConfigNamespace(f, cmd)
	if err != nil {
		return nil
	}
	client, err := util.Client(f)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: source.ConfigLabel + "=true"})
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(list.Items))
	for _, cm := range list.Items {
		names = append(names, cm.Name)
	}
	slices.Sort(names)
	return names
}
