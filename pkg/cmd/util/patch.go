package util

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// PatchedNode returns a copy of node with the JSON merge patch applied as
// the apiserver would apply it, without sending anything: what a client dry
// run prints. node is not modified.
func PatchedNode(node *corev1.Node, patch []byte) (*corev1.Node, error) {
	orig, err := json.Marshal(node)
	if err != nil {
		return nil, fmt.Errorf("apply patch: %w", err)
	}
	// The patches dkc sends hold no lists, so a strategic merge gives the
	// same result as a JSON merge patch: null deletes, maps merge.
	merged, err := strategicpatch.StrategicMergePatch(orig, patch, &corev1.Node{})
	if err != nil {
		return nil, fmt.Errorf("apply patch: %w", err)
	}
	out := &corev1.Node{}
	if err := json.Unmarshal(merged, out); err != nil {
		return nil, fmt.Errorf("apply patch: %w", err)
	}
	return out, nil
}
