package util

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// completionTimeout bounds the API calls of shell completion.
const completionTimeout = 5 * time.Second

// NodeNames lists the cluster's node names, sorted, for shell completion;
// nothing when the cluster cannot be reached.
func NodeNames(f genericclioptions.RESTClientGetter) []string {
	client, err := Client(f)
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

// ConfigNames lists the ConfigMaps dkc pushed (labelled source.ConfigLabel)
// in the config namespace, sorted; nothing when the cluster cannot be reached.
func ConfigNames(f genericclioptions.RESTClientGetter, cmd *cobra.Command) []string {
	client, err := Client(f)
	if err != nil {
		return nil
	}
	ns, err := ConfigNamespace(f, cmd)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	list, err := client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: source.ConfigLabel})
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

// CompleteNodeNames completes NODE arguments with the node names that start
// with what was typed, leaving out those already given.
func CompleteNodeNames(f genericclioptions.RESTClientGetter) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		for _, n := range NodeNames(f) {
			if strings.HasPrefix(n, toComplete) && !slices.Contains(args, n) {
				out = append(out, n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// CompleteConfigNames completes a flag with the names of dkc's ConfigMaps,
// as NAME or, after a ConfigMap type (configmap/), as TYPE/NAME.
func CompleteConfigNames(f genericclioptions.RESTClientGetter) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		typ, name := "", toComplete
		if t, rest, found := strings.Cut(toComplete, "/"); found && IsConfigMapType(t) {
			typ, name = t+"/", rest
		}
		var out []cobra.Completion
		for _, n := range ConfigNames(f, cmd) {
			if strings.HasPrefix(n, name) {
				out = append(out, typ+n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
