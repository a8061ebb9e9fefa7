package source

import (
	"encoding/json"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition returns the ConditionType condition of conds, nil when there is
// none.
func Condition(conds []corev1.NodeCondition) *corev1.NodeCondition {
	for i := range conds {
		if conds[i].Type == ConditionType {
			return &conds[i]
		}
	}
	return nil
}

// SetCondition returns conds with c set in place of the condition of the same
// type, or appended. LastHeartbeatTime becomes now. LastTransitionTime
// becomes now when the status changed or the condition is new, and is kept
// otherwise. conds is not modified.
func SetCondition(conds []corev1.NodeCondition, c corev1.NodeCondition, now metav1.Time) []corev1.NodeCondition {
	out := slices.Clone(conds)
	c.LastHeartbeatTime = now
	c.LastTransitionTime = now
	for i := range out {
		if out[i].Type != c.Type {
			continue
		}
		if out[i].Status == c.Status && !out[i].LastTransitionTime.IsZero() {
			c.LastTransitionTime = out[i].LastTransitionTime
		}
		out[i] = c
		return out
	}
	return append(out, c)
}

// ConditionPatch returns a strategic merge patch
// (types.StrategicMergePatchType) for the nodes/status subresource that sets
// condition c and leaves the node's other conditions alone: conditions merge
// on their type. Empty reason and message are sent as null, so they replace
// the old ones. Compute c with SetCondition to keep its LastTransitionTime.
func ConditionPatch(c corev1.NodeCondition) ([]byte, error) {
	return json.Marshal(map[string]any{
		"status": map[string]any{"conditions": []any{map[string]any{
			"type":               c.Type,
			"status":             c.Status,
			"reason":             orNull(c.Reason),
			"message":            orNull(c.Message),
			"lastHeartbeatTime":  c.LastHeartbeatTime,
			"lastTransitionTime": c.LastTransitionTime,
		}}},
	})
}
