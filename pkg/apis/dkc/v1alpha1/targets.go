// The stored form of an undo's per-node targets: across a fleet most nodes
// go back to the same assignment, so the object lists each one once with
// the nodes that get it.

package v1alpha1

import (
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// Targets are an undo's per-node targets (Spec.Targets): nil sends a node
// back to its local config. They are stored as groups, each target once
// with the nodes that get it: [{"config": ..., "nodes": [...]}].
type Targets map[string]*corev1.NodeConfigSource

// TargetPins are the pins of Targets (Spec.TargetPins), stored as groups
// too: [{"nodes": [...], "pin": ...}].
type TargetPins map[string]*source.Pin

// TargetGroup is the stored form of one group of Targets: the schema of
// deploy/crds.yaml, where Targets are a list of them.
type TargetGroup struct {
	// Config is the nodes' config; null means their local config.
	// +optional
	// +nullable
	Config *corev1.NodeConfigSource `json:"config"`
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=5000
	// +kubebuilder:validation:items:MaxLength=253
	Nodes []string `json:"nodes"`
}

// PinGroup is the stored form of one group of TargetPins: the schema of
// deploy/crds.yaml, where TargetPins are a list of them.
type PinGroup struct {
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=5000
	// +kubebuilder:validation:items:MaxLength=253
	Nodes []string    `json:"nodes"`
	Pin   *source.Pin `json:"pin"`
}

// MarshalJSON stores t as groups.
func (t Targets) MarshalJSON() ([]byte, error) { return marshalGroups(t, "config") }

// UnmarshalJSON reads t from groups.
func (t *Targets) UnmarshalJSON(data []byte) error {
	return unmarshalGroups((*map[string]*corev1.NodeConfigSource)(t), data, "config")
}

// MarshalJSON stores p as groups.
func (p TargetPins) MarshalJSON() ([]byte, error) { return marshalGroups(p, "pin") }

// UnmarshalJSON reads p from groups.
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
