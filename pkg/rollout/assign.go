package rollout

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// Assign assigns the node named name target pinned by pin, outside any
// rollout, the way a rollout assigns one of its nodes (patchOver), with no
// mark: no rollout started it, and no undo takes it back. Through
// the apiserver's carrier, on the condition that the node still holds
// previous. node is the Node as last seen (nil: read it first). A pool
// assigns a node that registers with the startup taint this way: it runs
// no workload yet, so it is configured at once, outside the pool's budget.
func Assign(ctx context.Context, client kubernetes.Interface, name string, node *corev1.Node, target *corev1.NodeConfigSource, pin *source.Pin, previous *corev1.NodeConfigSource) error {
	carrier := source.Annotation
	if target != nil {
		c, err := source.Detect(ctx, client.CoreV1().Nodes(), name)
		if err != nil {
			return err
		}
		carrier = c
	}
	return patchOver(ctx, client, name, node, previous, func(node *corev1.Node) ([]byte, error) {
		if source.Holds(node, target, pin) {
			return nil, nil
		}
		return source.AssignPatchAt(carrier, target, pin, node.ResourceVersion)
	})
}
