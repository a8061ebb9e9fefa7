package status

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// HistoryKind is the kind of a NodeConfigHistory.
const HistoryKind = "NodeConfigHistory"

// NodeConfigHistory is the configs one node's kubelet was put on by its
// dkc agent, oldest first, as `kubectl dkc rollout history NODE -o
// json|yaml` prints it:
//
//	{"kind":"NodeConfigHistory","apiVersion":"kubectl-dkc.io/v1alpha1",
//	 "metadata":{"name":"n1"},
//	 "entries":[{"source":{...},"time":"...","result":"Applied"}]}
//
// entries holds the node's history annotation as the agent wrote it.
type NodeConfigHistory struct {
	metav1.TypeMeta `json:",inline"`
	// ObjectMeta holds only the node's name.
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Entries is the history, oldest first; empty, never null, when the
	// node has none.
	Entries []source.HistoryEntry `json:"entries"`
}

// HistoryFromNode reads node's history annotation.
func HistoryFromNode(node *corev1.Node) (*NodeConfigHistory, error) {
	h, err := source.History(node)
	if err != nil {
		return nil, err
	}
	if h == nil {
		h = []source.HistoryEntry{}
	}
	return &NodeConfigHistory{
		TypeMeta:   metav1.TypeMeta{Kind: HistoryKind, APIVersion: SchemeGroupVersion.String()},
		ObjectMeta: metav1.ObjectMeta{Name: node.Name},
		Entries:    h,
	}, nil
}

// DeepCopy returns a deep copy of in.
func (in *NodeConfigHistory) DeepCopy() *NodeConfigHistory {
	if in == nil {
		return nil
	}
	out := &NodeConfigHistory{TypeMeta: in.TypeMeta}
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if in.Entries != nil {
		out.Entries = make([]source.HistoryEntry, len(in.Entries))
		for i, e := range in.Entries {
			e.Source = e.Source.DeepCopy()
			e.Time = *e.Time.DeepCopy()
			out.Entries[i] = e
		}
	}
	return out
}

// DeepCopyObject implements runtime.Object, for kubectl's printers.
func (in *NodeConfigHistory) DeepCopyObject() runtime.Object { return in.DeepCopy() }

var _ runtime.Object = &NodeConfigHistory{}
