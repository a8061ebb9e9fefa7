package status

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubectl-dkc/dkc/pkg/apis/dkc/v1alpha1"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// SchemeGroupVersion is the group and version of the objects `kubectl dkc
// status -o json|yaml` prints: the API's (v1alpha1.SchemeGroupVersion). The
// objects are never served by an apiserver, so the version only marks their
// shape.
var SchemeGroupVersion = v1alpha1.SchemeGroupVersion

// Kind is the kind of a NodeConfig.
const Kind = "NodeConfig"

// NodeConfig is one node's Dynamic Kubelet Configuration state, as `kubectl
// dkc status` prints it:
//
//	{"kind":"NodeConfig","apiVersion":"kubectl-dkc.io/v1alpha1",
//	 "metadata":{"name":"n1"},
//	 "carrier":"annotation",
//	 "configSource":{"configMap":{"namespace":"kube-system","name":"cm","kubeletConfigKey":"kubelet"}},
//	 "status":{"assigned":{...},"active":{...},"lastKnownGood":{...},"error":"..."},
//	 "agent":"ready"}
//
// configSource is what the operator requested (the node's spec.configSource or
// its annotation), and is absent for the local config. status has the shape of
// the old .status.config, so `jq .status` does what `jq .status.config` did;
// it is absent while the node reports nothing. The status can lag behind the
// request: compare them with Reached.
type NodeConfig struct {
	metav1.TypeMeta `json:",inline"`
	// ObjectMeta holds only the node's name.
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Carrier holds the request; when there is none, it holds the status.
	// Empty when the node has neither.
	Carrier source.Carrier `json:"carrier,omitempty"`
	// ConfigSource is the requested assignment; nil means the local config.
	ConfigSource *corev1.NodeConfigSource `json:"configSource,omitempty"`
	// Pin is the assignment's pin: the digest of the bytes the node may
	// apply and the unsafe classes it allows; nil when the node holds none.
	Pin *source.Pin `json:"pin,omitempty"`
	// JudgedPin is the pin the node's agent judged when it wrote Status;
	// nil when the status does not say (the native carrier). A status
	// whose JudgedPin is not Pin speaks of bytes pinned before.
	JudgedPin *source.Pin `json:"judgedPin,omitempty"`
	// Status is what the node reports; nil when it reports nothing.
	Status *corev1.NodeConfigStatus `json:"status,omitempty"`
	// Agent says whether a dkc agent looks after the node: none, ready,
	// verifying (its health gate still runs) or stale (see AgentState).
	Agent AgentState `json:"agent,omitempty"`
}

// NodeConfigList is the `kind: List, apiVersion: v1` that wraps NodeConfigs
// for -o json|yaml, as kubectl wraps several objects.
type NodeConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []NodeConfig `json:"items"`
}

// FromNode reads node's request and status from whichever carrier holds
// them, and its AgentState now.
func FromNode(node *corev1.Node) (NodeConfig, error) {
	return FromNodeAt(node, time.Now())
}

// FromNodeAt is FromNode with the AgentState at time now.
func FromNodeAt(node *corev1.Node, now time.Time) (NodeConfig, error) {
	item := NodeConfig{
		TypeMeta:   metav1.TypeMeta{Kind: Kind, APIVersion: SchemeGroupVersion.String()},
		ObjectMeta: metav1.ObjectMeta{Name: node.Name},
	}
	src, assignedCarrier, err := source.Assigned(node)
	if err != nil {
		return item, err
	}
	st, statusCarrier, err := source.Status(node)
	if err != nil {
		return item, err
	}
	if src != nil {
		if item.Pin, err = source.PinOf(node); err != nil {
			return item, err
		}
		if item.JudgedPin, err = source.JudgedPin(node); err != nil {
			return item, err
		}
	}
	item.ConfigSource, item.Status, item.Carrier = src, st, assignedCarrier
	item.Agent = Agent(node, now)
	if item.Carrier == "" {
		item.Carrier = statusCarrier
	}
	return item, nil
}

// NewList returns items in a List, sorted by node name. items is not
// modified.
func NewList(items []NodeConfig) *NodeConfigList {
	return &NodeConfigList{
		TypeMeta: metav1.TypeMeta{Kind: "List", APIVersion: "v1"},
		Items:    sorted(items),
	}
}

// sorted returns a copy of items sorted by node name: an empty slice,
// never nil, for none.
func sorted(items []NodeConfig) []NodeConfig {
	out := append([]NodeConfig{}, items...)
	slices.SortStableFunc(out, func(a, b NodeConfig) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// DeepCopyInto copies in into out.
func (in *NodeConfig) DeepCopyInto(out *NodeConfig) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.ConfigSource = in.ConfigSource.DeepCopy()
	out.Pin = in.Pin.DeepCopy()
	out.JudgedPin = in.JudgedPin.DeepCopy()
	out.Status = in.Status.DeepCopy()
}

// DeepCopy returns a deep copy of in.
func (in *NodeConfig) DeepCopy() *NodeConfig {
	if in == nil {
		return nil
	}
	out := new(NodeConfig)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object, for kubectl's printers.
func (in *NodeConfig) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopy returns a deep copy of in.
func (in *NodeConfigList) DeepCopy() *NodeConfigList {
	if in == nil {
		return nil
	}
	out := &NodeConfigList{TypeMeta: in.TypeMeta}
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]NodeConfig, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

// DeepCopyObject implements runtime.Object, for kubectl's printers.
func (in *NodeConfigList) DeepCopyObject() runtime.Object { return in.DeepCopy() }

var (
	_ runtime.Object = &NodeConfig{}
	_ runtime.Object = &NodeConfigList{}
)
