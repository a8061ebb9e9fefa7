package source

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HistoryAnnotation holds the JSON of a []HistoryEntry, oldest first: the
// configs the node's kubelet was put on by its agent, when, and how each
// apply ended. The agent appends to it with its status writes and keeps at
// most MaxHistory entries; `kubectl dkc rollout history NODE` reads it.
const HistoryAnnotation = Prefix + "config-history"

// MaxHistory bounds HistoryAnnotation.
const MaxHistory = 10

// Results of a HistoryEntry.
const (
	// ResultApplied: the kubelet runs the config and passed the health gate.
	ResultApplied = "Applied"
	// ResultRolledBack: the kubelet failed the health gate on the config and
	// was put back on the last-known-good config.
	ResultRolledBack = "RolledBack"
	// ResultRefused: the config failed its checks; the kubelet was not
	// touched.
	ResultRefused = "Refused"
	// ResultReset: the assignment was removed and the kubelet runs its
	// local config (Source is nil).
	ResultReset = "Reset"
	// ResultDrift: something other than the agent rewrote the kubelet's
	// config.
	ResultDrift = "Drift"
)

// HistoryEntry is one apply the agent made, or one change it saw.
type HistoryEntry struct {
	// Source is the config, with uid and resourceVersion; nil means the
	// node's local config.
	Source *corev1.NodeConfigSource `json:"source,omitempty"`
	// Time is when the apply ended.
	Time metav1.Time `json:"time"`
	// Result is one of the Result* constants.
	Result string `json:"result"`
	// Message says more, such as the error that caused a rollback.
	Message string `json:"message,omitempty"`
}

// History returns node's history, oldest first; nil when it has none.
func History(node *corev1.Node) ([]HistoryEntry, error) {
	var h []HistoryEntry
	if _, err := fromAnnotation(node, HistoryAnnotation, &h); err != nil {
		return nil, err
	}
	return h, nil
}

// AppendHistory returns h with e appended, keeping the newest MaxHistory
// entries.
func AppendHistory(h []HistoryEntry, e HistoryEntry) []HistoryEntry {
	out := append(append([]HistoryEntry(nil), h...), e)
	if len(out) > MaxHistory {
		out = out[len(out)-MaxHistory:]
	}
	return out
}

// HistoryValue is the annotation value of h.
func HistoryValue(h []HistoryEntry) (string, error) {
	b, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("encode %s: %w", HistoryAnnotation, err)
	}
	return string(b), nil
}
