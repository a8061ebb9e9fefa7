package rollout

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// LiveStatus returns r with its nodes (Resolve) and their phases read from
// the nodes now, and its State: Live over one List of the nodes, as rollout
// status shows a rollout whether or not a client drives it. It lists every
// node, not only those r's selector picks: r covers the nodes it started
// that left the selector too (Covers). A node the List does not hold is
// Skipped, as Live skips a node not found.
func LiveStatus(ctx context.Context, client kubernetes.Interface, r *Rollout) (*Rollout, error) {
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	byName := make(map[string]int, len(list.Items))
	nodes := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		byName[list.Items[i].Name] = i
		nodes[i] = &list.Items[i]
	}
	if r, err = Resolve(r, nodes, nil); err != nil {
		return nil, err
	}
	live, _, _, err := Live(r, func(name string) (*corev1.Node, error) {
		if i, ok := byName[name]; ok {
			return &list.Items[i], nil
		}
		return nil, nil
	}, metav1.NowMicro())
	if live != nil {
		live.Status.State = live.State()
	}
	return live, err
}
