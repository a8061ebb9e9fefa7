// The fields a node's kubelet flags set, as its agent records them on the
// Node: assign and rollout start check a config against a fleet from the
// Node objects, without a read of every kubelet through the apiserver's
// node proxy.

package flagz

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// Annotation on a Node holds the JSON of the []Shadow of its kubelet, as
// the node's agent last read its /flagz: [] when no flag sets a field of
// Fields. A Node without it (no agent, or a kubelet that does not serve
// /flagz) has flags that are not known from the Node. The agent writes it;
// it is a fact about the node and decides nothing but a refusal.
const Annotation = source.Prefix + "shadowed-fields"

// Encode returns the value of Annotation for shadowed.
func Encode(shadowed []Shadow) string {
	if shadowed == nil {
		shadowed = []Shadow{}
	}
	b, _ := json.Marshal(shadowed) // strings only: it cannot fail
	return string(b)
}

// OnNode returns the fields that node's kubelet flags set, as its
// Annotation records them, and whether it records them: a value that does
// not decode records nothing.
func OnNode(node *corev1.Node) ([]Shadow, bool) {
	v, ok := node.Annotations[Annotation]
	if !ok {
		return nil, false
	}
	var shadowed []Shadow
	if err := json.Unmarshal([]byte(v), &shadowed); err != nil || shadowed == nil {
		return nil, false
	}
	return shadowed, true
}
