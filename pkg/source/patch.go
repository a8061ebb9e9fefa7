package source

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// The patches below are JSON merge patches (types.MergePatchType, RFC 7386).
// A merge patch merges objects key by key, so a key the new value lacks would
// keep its old value. The patches therefore spell out every field of a
// NodeConfigSource and a NodeConfigStatus, with null for the empty ones, and
// so replace the old value whole.

// AssignPatch returns a JSON merge patch for a Node that assigns src through
// carrier c, pinned by pin, and clears the other carrier so that a node never
// holds two different assignments. The pin goes in PinAnnotation on either
// carrier, in the same patch, so that the reference and the pin change
// together; a nil pin removes it (an agent applies nothing unpinned). A nil
// src removes the assignment and the pin from both carriers, whatever c and
// pin are: the node goes back to its local config. src must pass
// ValidateSource, and a pin must be For src. Send the patch to the Node
// itself, not to nodes/status.
func AssignPatch(c Carrier, src *corev1.NodeConfigSource, pin *Pin) ([]byte, error) {
	return assignPatch(c, src, pin, "")
}

// AssignPatchAt is AssignPatch with a precondition: the apiserver applies it
// only to the Node at resourceVersion rv, and answers 409 Conflict when the
// Node changed since.
func AssignPatchAt(c Carrier, src *corev1.NodeConfigSource, pin *Pin, rv string) ([]byte, error) {
	return assignPatch(c, src, pin, rv)
}

func assignPatch(c Carrier, src *corev1.NodeConfigSource, pin *Pin, rv string) ([]byte, error) {
	if err := checkStored(c); err != nil {
		return nil, err
	}
	if err := ValidateSource(src); err != nil {
		return nil, err
	}
	annotation, native, pinned := any(nil), any(nil), any(nil)
	if src != nil {
		switch c {
		case Native:
			native = sourceValue(src)
		case Annotation:
			value, err := json.Marshal(src)
			if err != nil {
				return nil, fmt.Errorf("encode config source: %w", err)
			}
			annotation = string(value)
		}
		if pin != nil {
			if !pin.For(src) {
				return nil, fmt.Errorf("pin for %s/%s key %q does not pin the assignment of %s/%s key %q",
					pin.Namespace, pin.Name, pin.KubeletConfigKey, src.ConfigMap.Namespace, src.ConfigMap.Name, src.ConfigMap.KubeletConfigKey)
			}
			value, err := json.Marshal(pin)
			if err != nil {
				return nil, fmt.Errorf("encode config pin: %w", err)
			}
			pinned = string(value)
		}
	}
	metadata := map[string]any{"annotations": map[string]any{AssignedAnnotation: annotation, PinAnnotation: pinned}}
	if rv != "" {
		metadata["resourceVersion"] = rv
	}
	return json.Marshal(map[string]any{
		"metadata": metadata,
		"spec":     map[string]any{"configSource": native},
	})
}

// StatusPatch returns a JSON merge patch that records st through carrier c
// and clears the other carrier. A nil st removes the status from both.
// judged is the pin of the assignment the status speaks of (JudgedPin
// reads it back), so that a reader can tell a verdict on the bytes pinned
// now from one on bytes pinned before under the same reference; the
// annotation carrier records it, the native status.config has no place
// for it.
//
// Send it to the nodes/status subresource: only there does the apiserver keep
// status.config, and metadata changes made through nodes/status persist too
// (the node status strategy resets only spec). For the annotation carrier the
// patch works on the Node itself as well, where the apiserver ignores status.
func StatusPatch(c Carrier, st *corev1.NodeConfigStatus, judged *Pin) ([]byte, error) {
	if err := checkStored(c); err != nil {
		return nil, err
	}
	annotation, native := any(nil), any(nil)
	if st != nil {
		switch c {
		case Native:
			native = statusValue(st)
		case Annotation:
			value, err := json.Marshal(judgedStatus{NodeConfigStatus: st, Pin: judged})
			if err != nil {
				return nil, fmt.Errorf("encode config status: %w", err)
			}
			annotation = string(value)
		}
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{StatusAnnotation: annotation}},
		"status":   map[string]any{"config": native},
	})
}

// judgedStatus is the value of StatusAnnotation: a NodeConfigStatus, and the
// pin of the assignment it judged.
type judgedStatus struct {
	*corev1.NodeConfigStatus
	Pin *Pin `json:"pin,omitempty"`
}

// JudgedPin returns the pin that node's status annotation says its agent
// judged, nil when it names none (the native carrier, or an agent that does
// not record it).
func JudgedPin(node *corev1.Node) (*Pin, error) {
	v := struct {
		Pin *Pin `json:"pin"`
	}{}
	if _, err := fromAnnotation(node, StatusAnnotation, &v); err != nil {
		return nil, err
	}
	return v.Pin, nil
}

// checkStored checks that c is a carrier a Node can hold: not Auto.
func checkStored(c Carrier) error {
	switch c {
	case Native, Annotation:
		return nil
	case Auto:
		return fmt.Errorf("carrier %q: resolve it with Detect before writing", c)
	default:
		return fmt.Errorf("carrier %q: unknown, want %q or %q", c, Native, Annotation)
	}
}

// sourceValue is src for a merge patch, with every field present.
func sourceValue(src *corev1.NodeConfigSource) any {
	if src == nil {
		return nil
	}
	var cm any
	if ref := src.ConfigMap; ref != nil {
		cm = map[string]any{
			"namespace":        orNull(ref.Namespace),
			"name":             orNull(ref.Name),
			"uid":              orNull(string(ref.UID)),
			"resourceVersion":  orNull(ref.ResourceVersion),
			"kubeletConfigKey": orNull(ref.KubeletConfigKey),
		}
	}
	return map[string]any{"configMap": cm}
}

// statusValue is st for a merge patch, with every field present.
func statusValue(st *corev1.NodeConfigStatus) any {
	return map[string]any{
		"assigned":      sourceValue(st.Assigned),
		"active":        sourceValue(st.Active),
		"lastKnownGood": sourceValue(st.LastKnownGood),
		"error":         orNull(st.Error),
	}
}

// orNull is s, or nil (JSON null, which deletes the key) when s is empty.
func orNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// PatchedNode returns a copy of node with patch, one of the JSON merge
// patches above, applied as the apiserver would apply it, without sending
// anything: what a client dry run prints. node is not modified.
func PatchedNode(node *corev1.Node, patch []byte) (*corev1.Node, error) {
	orig, err := json.Marshal(node)
	if err != nil {
		return nil, fmt.Errorf("apply patch: %w", err)
	}
	// The patches hold no lists, so a strategic merge gives the same result
	// as a JSON merge patch: null deletes, maps merge.
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
