// A node's part in a rollout lives on the node, as a DaemonSet pod carries
// its revision: the annotation MarkAnnotation names the rollout that
// started the node, with the assignment the node held before it, which
// undo sends it back to. The driver writes it in the same patch as the
// assignment, or, for a node it drains, in the patch that cordons it; so a
// node is never assigned by a rollout without the record that it was, and
// the rollout object holds no entry per node.

package rollout

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// MarkAnnotation holds a node's Mark. The admission policy
// kubectl-dkc-agent-nodes keeps the agent from writing it: what undo
// assigns is what a rollout's driver recorded.
const MarkAnnotation = "kubectl-dkc.io/rollout"

// Mark is a node's part in the rollout that last started it.
type Mark struct {
	// Rollout is namespace/name of the rollout, UID its UID: a rollout of
	// the same name created again does not own the node.
	Rollout string    `json:"rollout"`
	UID     types.UID `json:"uid"`
	// Revision is the digest of the target's bytes, as pinned; "" for the
	// local config.
	Revision string `json:"revision,omitempty"`
	// Previous is the assignment the node held before the rollout started
	// it, with its pin; nil: its local config.
	Previous    *corev1.NodeConfigSource `json:"previous,omitempty"`
	PreviousPin *source.Pin              `json:"previousPin,omitempty"`
	// Target and TargetPin are the node's own target, when the rollout
	// gives each node its own (an undo; nil Target: the local config);
	// absent when every node gets the rollout's config.
	Target    *corev1.NodeConfigSource `json:"target,omitempty"`
	TargetPin *source.Pin              `json:"targetPin,omitempty"`
	// Cordoned: the rollout cordoned the node to drain it, and uncordons
	// it once the node passed its health gate.
	Cordoned bool `json:"cordoned,omitempty"`
	// KeepCordoned: the node was unschedulable before the rollout
	// cordoned it, and stays so: the rollout clears Cordoned and leaves
	// spec.unschedulable to whoever set it.
	KeepCordoned bool `json:"keepCordoned,omitempty"`
	// Started is when the rollout started the node.
	Started metav1.MicroTime `json:"started"`
}

// MarkOf returns node's mark; nil when it has none.
func MarkOf(node *corev1.Node) (*Mark, error) {
	v, ok := node.Annotations[MarkAnnotation]
	if !ok || v == "" {
		return nil, nil
	}
	m := &Mark{}
	if err := json.Unmarshal([]byte(v), m); err != nil {
		return nil, fmt.Errorf("node %q: annotation %s: %w", node.Name, MarkAnnotation, err)
	}
	return m, nil
}

// Owns reports whether m names rollout r.
func (m *Mark) Owns(r *Rollout) bool { return m != nil && m.UID == r.UID && r.UID != "" }

// newMark is the mark of a node that r starts at now, holding previous
// pinned by previousPin.
func newMark(r *Rollout, node string, previous *corev1.NodeConfigSource, previousPin *source.Pin, cordon bool, now metav1.MicroTime) *Mark {
	m := &Mark{Rollout: r.Namespace + "/" + r.Name, UID: r.UID, Previous: previous, PreviousPin: previousPin, Cordoned: cordon, Started: now}
	target, pin := r.Spec.Target(node)
	if pin != nil {
		m.Revision = pin.Digest
	}
	if _, own := r.Spec.Targets[node]; own {
		m.Target, m.TargetPin = target, pin
	}
	return m
}

// markPatch adds to patch, a JSON merge patch of a Node, the annotation
// that records mark (nil: none changes), and spec.unschedulable when
// unschedulable is not nil.
func markPatch(patch []byte, mark *Mark, unschedulable *bool) ([]byte, error) {
	return markPatchAt(patch, mark, unschedulable, "")
}

// markPatchAt is markPatch with a precondition: the apiserver applies it
// only to the Node at resourceVersion rv (any, when "").
func markPatchAt(patch []byte, mark *Mark, unschedulable *bool, rv string) ([]byte, error) {
	p := map[string]any{}
	if len(patch) > 0 {
		if err := json.Unmarshal(patch, &p); err != nil {
			return nil, err
		}
	}
	if mark != nil {
		v, err := json.Marshal(mark)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", MarkAnnotation, err)
		}
		md, _ := p["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			p["metadata"] = md
		}
		ann, _ := md["annotations"].(map[string]any)
		if ann == nil {
			ann = map[string]any{}
			md["annotations"] = ann
		}
		ann[MarkAnnotation] = string(v)
	}
	if unschedulable != nil {
		spec, _ := p["spec"].(map[string]any)
		if spec == nil {
			spec = map[string]any{}
			p["spec"] = spec
		}
		spec["unschedulable"] = *unschedulable
	}
	if rv != "" {
		md, _ := p["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			p["metadata"] = md
		}
		md["resourceVersion"] = rv
	}
	return json.Marshal(p)
}
