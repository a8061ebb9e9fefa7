package source

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/kubectl-dkc/dkc/pkg/kubeclient"
)

// StartupTaint is the key of dkc's startup taint, which a node registers
// with (kubeadm's nodeRegistration.taints, the kubelet's
// registerWithTaints) so that no pod lands on it before its pool's config
// is active: kubectl-dkc.io/config-pending:NoSchedule. The agent removes it
// once the node's assigned config is active and passed its health gate;
// the controller, at once, from a node that no pool selects. The admission
// policy kubectl-dkc-startup-taint lets only holders of remove on
// startuptaints.kubectl-dkc.io remove it.
const StartupTaint = Prefix + "config-pending"

// Pending reports whether node carries the startup taint.
func Pending(node *corev1.Node) bool {
	return slices.ContainsFunc(node.Spec.Taints, isStartupTaint)
}

func isStartupTaint(t corev1.Taint) bool { return t.Key == StartupTaint }

// untaintPatch is the merge patch that removes the startup taint from
// node, on the condition that the Node is still at its resourceVersion:
// taints are an atomic list, so the patch names the ones that stay.
func untaintPatch(node *corev1.Node) ([]byte, error) {
	var taints any // null when none stays
	if rest := slices.DeleteFunc(slices.Clone(node.Spec.Taints), isStartupTaint); len(rest) > 0 {
		taints = rest
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": node.ResourceVersion},
		"spec":     map[string]any{"taints": taints},
	})
}

// RemoveStartupTaint removes the startup taint from the Node named name,
// which node shows as last seen (nil: read it first). A conflict reads the
// Node again (retry.RetryOnConflict); a Node without the taint is left as
// it is.
func RemoveStartupTaint(ctx context.Context, nodes kubeclient.NodeClient, name string, node *corev1.Node) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if node == nil {
			n, err := nodes.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			node = n
		}
		if !Pending(node) {
			return nil
		}
		patch, err := untaintPatch(node)
		if err != nil {
			return err
		}
		_, err = nodes.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
		if apierrors.IsConflict(err) {
			node = nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("remove taint %s from node %q: %w", StartupTaint, name, err)
	}
	return nil
}
