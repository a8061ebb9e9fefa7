package rollout

import (
	"context"
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

// NodeSpecific returns the node-specific fields that payload (a
// KubeletConfiguration, whole or partial) sets to the value one of nodes
// runs while others run other values: the bytes of one node, rolled out
// to many. Only when payload sets such a field are the nodes' configs read,
// from their kubelets' /configz (what each kubelet runs, whatever the apply
// mode); a node whose config cannot be read is left out, with a warning.
func (p *DrainPlanner) NodeSpecific(ctx context.Context, nodes []corev1.Node, payload []byte) ([]NodeSpecificValue, error) {
	if len(nodes) < 2 || len(setNodeSpecific(payload)) == 0 {
		return nil, nil
	}
	live := map[string]*kubeletconfigv1beta1.KubeletConfiguration{}
	for i := range nodes {
		cfg, err := p.kubeletConfig(ctx, &nodes[i])
		if err != nil {
			p.warn("node/%s: cannot read its config through /configz (%v); it is left out of the check for node-specific fields", nodes[i].Name, err)
			continue
		}
		live[nodes[i].Name] = cfg
	}
	return CompareNodeSpecific(payload, live)
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

// CompareNodeSpecific is NodeSpecific on the configs the nodes run (live,
// by node name).
func CompareNodeSpecific(payload []byte, live map[string]*kubeletconfigv1beta1.KubeletConfiguration) ([]NodeSpecificValue, error) {
	set := setNodeSpecific(payload)
	have := map[string]map[string]json.RawMessage{}
	for name, cfg := range live {
		m, err := fieldsOf(cfg)
		if err != nil {
			return nil, err
		}
		have[name] = m
	}
	var out []NodeSpecificValue
	for _, f := range NodeSpecificFields {
		want, ok := set[f]
		if !ok {
			continue
		}
		v := NodeSpecificValue{Field: f, Value: string(want)}
		for name, fields := range have {
			if jsonEqual(fields[f], want) {
				v.Of = append(v.Of, name)
			} else {
				v.Others++
			}
		}
		if len(v.Of) > 0 && v.Others > 0 {
			slices.Sort(v.Of)
			out = append(out, v)
		}
	}
	return out, nil
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

// NodeSpecificOnNodes is NodeSpecific for a reader that cannot read the
// kubelets' /configz (the controller, which holds no nodes/proxy): it
// compares the payload's address, healthzBindAddress, providerID and
// podCIDR with what the Node objects show, their addresses and spec. A
// certificate path is not on a Node: only NodeSpecific's read of /configz
// checks tlsCertFile and tlsPrivateKeyFile.
func NodeSpecificOnNodes(payload []byte, nodes []*corev1.Node) []NodeSpecificValue {
	if len(nodes) < 2 {
		return nil
	}
	set := setNodeSpecific(payload)
	var out []NodeSpecificValue
	for _, f := range NodeSpecificFields {
		want, ok := set[f]
		shows := nodeShows[f]
		if !ok || shows == nil {
			continue
		}
		var value string
		if json.Unmarshal(want, &value) != nil || value == "" {
			continue
		}
		v := NodeSpecificValue{Field: f, Value: string(want)}
		for _, n := range nodes {
			if slices.Contains(shows(n), value) {
				v.Of = append(v.Of, n.Name)
			} else {
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

// NodeSpecificError is the error of a rollout whose config carries one
// node's values: what to do about each.
func NodeSpecificError(config string, found []NodeSpecificValue) error {
	parts := make([]string, len(found))
	for i, v := range found {
		parts[i] = v.String()
	}
	return fmt.Errorf("config %s sets node-specific fields to one node's values while the target nodes differ: %s. Remove these fields from the config, or run the agents with --apply-mode=dropin and roll out a partial config with only the fields you change (docs/rollout.md, \"One config for every node\")",
		config, strings.Join(parts, "; "))
}
