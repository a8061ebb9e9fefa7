package util

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// NodeSelection is how a command names its nodes: NODE... arguments, a
// label selector (-l), or --all.
type NodeSelection struct {
	Names    []string
	Selector string
	All      bool
}

// AddFlags binds -l/--selector and --all.
func (s *NodeSelection) AddFlags(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&s.Selector, "selector", "l", "", "Selector (label query) to filter nodes on, supports '=', '==', '!=', 'in', 'notin' (e.g. -l key1=value1,key2=value2).")
	cmd.Flags().BoolVar(&s.All, "all", false, "Select all nodes.")
}

// Validate checks that exactly one way of naming nodes was used. With
// optional, naming no node at all means every node.
func (s *NodeSelection) Validate(optional bool) error {
	ways := 0
	if len(s.Names) > 0 {
		ways++
	}
	if s.Selector != "" {
		ways++
	}
	if s.All {
		ways++
	}
	switch {
	case ways > 1:
		return errors.New("name nodes in one way only: NODE arguments, -l/--selector, or --all")
	case ways == 0 && !optional:
		return errors.New("no nodes given: name them as arguments, or use -l/--selector or --all")
	}
	if s.Selector != "" {
		if _, err := labels.Parse(s.Selector); err != nil {
			return fmt.Errorf("invalid --selector %q: %w", s.Selector, err)
		}
	}
	return nil
}

// Resolve returns the selected nodes sorted by name. Named nodes are fetched
// one by one, so a missing node is an error that names it; a selector that
// matches nothing is an error too.
func (s *NodeSelection) Resolve(ctx context.Context, client kubernetes.Interface) ([]corev1.Node, error) {
	var nodes []corev1.Node
	if len(s.Names) > 0 {
		for _, name := range s.Names {
			n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("get node %q: %w", name, err)
			}
			nodes = append(nodes, *n)
		}
	} else {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: s.Selector})
		if err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		if len(list.Items) == 0 && s.Selector != "" {
			return nil, fmt.Errorf("no nodes match selector %q", s.Selector)
		}
		nodes = list.Items
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	return nodes, nil
}
