package status

import (
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// AgentState says whether a dkc agent looks after a node, as far as the Node
// object shows it. The agent writes only when something changes (its status,
// its condition), never as a heartbeat, so a stopped agent whose last report
// still answers the node's assignment cannot be told from a working one.
type AgentState string

const (
	// AgentNone: no agent has ever reported on the node: no status in
	// either carrier and no source.ConditionType condition. An assignment
	// to it is never applied. A running agent reports its condition at its
	// first sync, assigned or not.
	AgentNone AgentState = "none"
	// AgentReady: an agent has reported, and its status answers the node's
	// assignment (or the assignment is younger than StaleAfter).
	AgentReady AgentState = "ready"
	// AgentStale: an agent has reported before, but the node's assignment
	// has waited longer than StaleAfter without the agent taking it up
	// (status.assigned is not the assignment). The agent is likely gone or
	// stuck.
	AgentStale AgentState = "stale"
	// AgentVerifying: the agent reports that the kubelet runs the node's
	// assignment (status.active names it: the kubelet's configz shows it),
	// and its health gate still waits for a Ready from the restarted
	// kubelet (condition reason source.ReasonVerifying). The apply has not
	// ended: it ends ready, or with a rollback and an error.
	AgentVerifying AgentState = "verifying"
)

// StaleAfter is how long an assignment may wait for the agent to take it up
// before the agent counts as stale. A working agent takes an assignment up
// within seconds: it reports status.assigned before it restarts the kubelet.
const StaleAfter = 2 * time.Minute

// InstallHint points to the install guide, for messages about AgentNone.
const InstallHint = "see docs/install.md"

// Agent returns the AgentState of node at time now. The time of the
// assignment is taken from the Node's managedFields: the newest entry, not
// of a subresource, that owns the field holding the assignment. The entry's
// time is when that field last changed, or later; when no entry owns it the
// assignment's age is unknown and the agent counts as ready.
func Agent(node *corev1.Node, now time.Time) AgentState {
	st, _, stErr := source.Status(node)
	if st == nil && stErr == nil && source.Condition(node.Status.Conditions) == nil {
		return AgentNone
	}
	requested, carrier, err := source.Assigned(node)
	if err != nil || stErr != nil {
		return AgentReady // unreadable: the agent reports that itself
	}
	var assigned *corev1.NodeConfigSource
	if st != nil {
		assigned = st.Assigned
	}
	if source.Equal(assigned, requested) {
		if c := source.Condition(node.Status.Conditions); c != nil && c.Reason == source.ReasonVerifying {
			return AgentVerifying
		}
		return AgentReady
	}
	at, ok := requestedAt(node, carrier)
	if !ok || now.Sub(at) <= StaleAfter {
		return AgentReady
	}
	return AgentStale
}

// requestedAt is the newest managedFields time of the field that carrier c
// holds the assignment in. No carrier (a removed assignment) has no time.
func requestedAt(node *corev1.Node, c source.Carrier) (time.Time, bool) {
	var path []string
	switch c {
	case source.Native:
		path = []string{"f:spec", "f:configSource"}
	case source.Annotation:
		path = []string{"f:metadata", "f:annotations", "f:" + source.AssignedAnnotation}
	default:
		return time.Time{}, false
	}
	var newest time.Time
	for _, e := range node.ManagedFields {
		if e.Subresource != "" || e.FieldsV1 == nil || e.Time == nil || !owns(e.FieldsV1.Raw, path) {
			continue
		}
		if e.Time.After(newest) {
			newest = e.Time.Time
		}
	}
	return newest, !newest.IsZero()
}

// owns reports whether the fieldsV1 JSON raw holds path.
func owns(raw []byte, path []string) bool {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return false
	}
	for i, key := range path {
		v, ok := fields[key]
		if !ok {
			return false
		}
		if i == len(path)-1 {
			return true
		}
		fields = nil
		if err := json.Unmarshal(v, &fields); err != nil {
			return false
		}
	}
	return false
}
