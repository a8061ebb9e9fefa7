package rollout

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// NodeSpecificFields are the KubeletConfiguration fields whose value is
// usually one node's own: its address, its serving certificate, its
// provider ID, its pod CIDR. A config snapshotted from one node carries
// them, and is wrong for every other node.
var NodeSpecificFields = []string{"address", "healthzBindAddress", "tlsCertFile", "tlsPrivateKeyFile", "providerID", "podCIDR"}

// NodeSpecificValue is one node-specific field that a payload sets to one
// target node's value, while other targets run other values.
type NodeSpecificValue struct {
	Field string
	// Value is the payload's value, as JSON.
	Value string
	// Of names the target nodes that run Value; Others counts those that
	// run another value.
	Of     []string
	Others int
}

func (v NodeSpecificValue) String() string {
	of := strings.Join(v.Of[:min(len(v.Of), 3)], ", ")
	if len(v.Of) > 3 {
		of += fmt.Sprintf(" and %d more", len(v.Of)-3)
	}
	return fmt.Sprintf("%s %s (the value of %s; %d other target nodes run another)", v.Field, v.Value, of, v.Others)
}

// setNodeSpecific returns the NodeSpecificFields that payload sets, with
// their values as JSON.
func setNodeSpecific(payload []byte) map[string]json.RawMessage {
	var set map[string]json.RawMessage
	if err := yaml.Unmarshal(payload, &set); err != nil {
		return nil // the agents refuse a payload that does not decode
	}
	out := map[string]json.RawMessage{}
	for _, f := range NodeSpecificFields {
		if v, ok := set[f]; ok {
			out[f] = v
		}
	}
	return out
}

// nodeSpecific returns the node-specific fields that payload (a
// KubeletConfiguration, whole or partial) sets to a value that one of nodes
// holds while another does not: the bytes of one node, rolled out to many.
// A node holds a value when its kubelet runs it (live, from /configz, where
// known) or its Node object shows it (its addresses for address and
// healthzBindAddress, its spec for providerID and podCIDR). A node known
// neither way for a field (a certificate path, with no /configz) is left
// out of that field's comparison.
func nodeSpecific(payload []byte, nodes []*corev1.Node, live map[string]*kubeletconfigv1beta1.KubeletConfiguration) []NodeSpecificValue {
	if len(nodes) < 2 {
		return nil
	}
	set := setNodeSpecific(payload)
	if len(set) == 0 {
		return nil
	}
	have := map[string]map[string]json.RawMessage{}
	for _, n := range nodes {
		if cfg, ok := live[n.Name]; ok && cfg != nil {
			if m, err := fieldsOf(cfg); err == nil {
				have[n.Name] = m
			}
		}
	}
	var out []NodeSpecificValue
	for _, f := range NodeSpecificFields {
		want, ok := set[f]
		if !ok {
			continue
		}
		var str string
		if json.Unmarshal(want, &str) != nil {
			str = ""
		}
		shows := nodeShows[f]
		v := NodeSpecificValue{Field: f, Value: string(want)}
		for _, n := range nodes {
			fields, known := have[n.Name]
			switch {
			case known && jsonEqual(fields[f], want):
				v.Of = append(v.Of, n.Name)
			case shows != nil && str != "" && slices.Contains(shows(n), str):
				v.Of = append(v.Of, n.Name)
			case known || shows != nil:
				v.Others++
			}
		}
		if len(v.Of) > 0 && v.Others > 0 {
			slices.Sort(v.Of)
			out = append(out, v)
		}
	}
	return out
}

// fieldsOf returns cfg's fields by JSON name.
func fieldsOf(cfg *kubeletconfigv1beta1.KubeletConfiguration) (map[string]json.RawMessage, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	return m, json.Unmarshal(b, &m)
}

// jsonEqual reports whether a and b are the same JSON value; an absent
// value equals the empty string, as an unset string field.
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if len(a) == 0 {
		a = json.RawMessage(`""`)
	}
	if len(b) == 0 {
		b = json.RawMessage(`""`)
	}
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// nodeShows are the node-specific fields that a Node object shows, and
// the values it shows for each: the kubelet serves on one of the node's
// addresses, and providerID and podCIDR are in its spec.
var nodeShows = map[string]func(*corev1.Node) []string{
	"address":            nodeAddresses,
	"healthzBindAddress": nodeAddresses,
	"providerID":         func(n *corev1.Node) []string { return []string{n.Spec.ProviderID} },
	"podCIDR":            func(n *corev1.Node) []string { return []string{n.Spec.PodCIDR} },
}

func nodeAddresses(n *corev1.Node) []string {
	var out []string
	for _, a := range n.Status.Addresses {
		out = append(out, a.Address)
	}
	return out
}
