// The stored form of a rollout's status. A rollout records, for each node it
// started, the assignment the node held before, with its pin: what undo
// sends it back to. Across a fleet most nodes held the same one, so the
// object lists each such assignment once (status.previous) and a node's
// status names its entry by index. A finished rollout over 5000 nodes then
// takes 169 bytes per node instead of 540, and stays well under etcd's
// default request limit of 1.5 MiB, which every write of the object must
// fit (docs/design/rollout.md, "The rollout object"). In memory, NodeStatus keeps
// the assignment and pin themselves.

package rollout

import (
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// Assignment is one entry of status.previous: an assignment and its pin.
type Assignment struct {
	Config *corev1.NodeConfigSource `json:"config"`
	Pin    *source.Pin              `json:"pin,omitempty"`
}

// wireStatus is Status as stored.
type wireStatus struct {
	State      State                     `json:"state,omitempty"`
	Reason     string                    `json:"reason,omitempty"`
	Wave       int                       `json:"wave"`
	SoakSince  *metav1.Time              `json:"soakSince,omitempty"`
	Previous   []Assignment              `json:"previous,omitempty"`
	Nodes      map[string]wireNodeStatus `json:"nodes,omitempty"`
	LastUpdate metav1.Time               `json:"lastUpdate"`
}

// wireNodeStatus is NodeStatus as stored: Previous is an index in
// wireStatus.Previous; absent, the node's local config.
type wireNodeStatus struct {
	Phase    Phase             `json:"phase"`
	Previous *int              `json:"previous,omitempty"`
	Error    string            `json:"error,omitempty"`
	Cordoned bool              `json:"cordoned,omitempty"`
	Queued   bool              `json:"queued,omitempty"`
	Started  *metav1.MicroTime `json:"started,omitempty"`
	Finished *metav1.MicroTime `json:"finished,omitempty"`
}

// MarshalJSON writes s in its stored form. The entries of status.previous
// are in the order of the nodes' names, so that equal statuses encode
// equally.
func (s Status) MarshalJSON() ([]byte, error) {
	w := wireStatus{State: s.State, Reason: s.Reason, Wave: s.Wave, SoakSince: s.SoakSince, LastUpdate: s.LastUpdate}
	if s.Nodes != nil {
		w.Nodes = make(map[string]wireNodeStatus, len(s.Nodes))
	}
	names := make([]string, 0, len(s.Nodes))
	for name := range s.Nodes {
		names = append(names, name)
	}
	slices.Sort(names)
	// An entry is known by its own encoding: equal entries encode equally.
	index := map[string]int{}
	for _, name := range names {
		ns := s.Nodes[name]
		wn := wireNodeStatus{Phase: ns.Phase, Error: ns.Error, Cordoned: ns.Cordoned, Queued: ns.Queued, Started: ns.Started, Finished: ns.Finished}
		if ns.Previous != nil {
			a := Assignment{Config: ns.Previous, Pin: ns.PreviousPin}
			key, err := json.Marshal(a)
			if err != nil {
				return nil, err
			}
			i, ok := index[string(key)]
			if !ok {
				i = len(w.Previous)
				index[string(key)] = i
				w.Previous = append(w.Previous, a)
			}
			wn.Previous = &i
		}
		w.Nodes[name] = wn
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads s from its stored form. A node that names an entry
// status.previous does not have is an error: undo must not take it for a
// node that ran its local config.
func (s *Status) UnmarshalJSON(data []byte) error {
	var w wireStatus
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*s = Status{State: w.State, Reason: w.Reason, Wave: w.Wave, SoakSince: w.SoakSince, LastUpdate: w.LastUpdate}
	if w.Nodes != nil {
		s.Nodes = make(map[string]NodeStatus, len(w.Nodes))
	}
	for name, wn := range w.Nodes {
		ns := NodeStatus{Phase: wn.Phase, Error: wn.Error, Cordoned: wn.Cordoned, Queued: wn.Queued, Started: wn.Started, Finished: wn.Finished}
		if wn.Previous != nil {
			i := *wn.Previous
			if i < 0 || i >= len(w.Previous) {
				return fmt.Errorf("status.nodes[%q].previous is %d, but status.previous has %d entries", name, i, len(w.Previous))
			}
			ns.Previous, ns.PreviousPin = w.Previous[i].Config.DeepCopy(), w.Previous[i].Pin.DeepCopy()
		}
		s.Nodes[name] = ns
	}
	return nil
}

// Targets are an undo's per-node targets (Spec.Targets): nil sends a node
// back to its local config. They are stored as groups, each target once
// with the nodes that get it: [{"config": ..., "nodes": [...]}].
type Targets map[string]*corev1.NodeConfigSource

// TargetPins are the pins of Targets (Spec.TargetPins), stored as groups
// too: [{"pin": ..., "nodes": [...]}].
type TargetPins map[string]*source.Pin

func (t Targets) MarshalJSON() ([]byte, error) { return marshalGroups(t, "config") }
func (t *Targets) UnmarshalJSON(data []byte) error {
	return unmarshalGroups((*map[string]*corev1.NodeConfigSource)(t), data, "config")
}

func (p TargetPins) MarshalJSON() ([]byte, error) { return marshalGroups(p, "pin") }
func (p *TargetPins) UnmarshalJSON(data []byte) error {
	return unmarshalGroups((*map[string]*source.Pin)(p), data, "pin")
}

// marshalGroups stores m as groups of the nodes that map to one value,
// under key: in the order of their first node by name, each group's nodes
// sorted.
func marshalGroups[T any](m map[string]T, key string) ([]byte, error) {
	if m == nil {
		return []byte("null"), nil
	}
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	slices.Sort(names)
	var groups []map[string]any
	index := map[string]int{}
	for _, name := range names {
		v, err := json.Marshal(m[name])
		if err != nil {
			return nil, err
		}
		i, ok := index[string(v)]
		if !ok {
			i = len(groups)
			index[string(v)] = i
			groups = append(groups, map[string]any{key: json.RawMessage(v), "nodes": []string{}})
		}
		groups[i]["nodes"] = append(groups[i]["nodes"].([]string), name)
	}
	if groups == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(groups)
}

// unmarshalGroups reads into m what marshalGroups stored. A node in two
// groups is an error.
func unmarshalGroups[T any](m *map[string]T, data []byte, key string) error {
	var groups []map[string]json.RawMessage
	if err := json.Unmarshal(data, &groups); err != nil {
		return err
	}
	if groups == nil {
		*m = nil
		return nil
	}
	*m = map[string]T{}
	for _, g := range groups {
		var v T
		if raw, ok := g[key]; ok {
			if err := json.Unmarshal(raw, &v); err != nil {
				return err
			}
		}
		var nodes []string
		if err := json.Unmarshal(g["nodes"], &nodes); err != nil {
			return fmt.Errorf("nodes of a group of %ss: %w", key, err)
		}
		for _, n := range nodes {
			if _, dup := (*m)[n]; dup {
				return fmt.Errorf("node %q is in two groups of %ss", n, key)
			}
			(*m)[n] = v
		}
	}
	return nil
}
