package rollout

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/pkg/status"
)

// TestObservationsDecodeOnlyChangedNodes: the engine's cache answers from
// the last observation of a node while its resourceVersion and target are
// the same, and observes it again when either changes, or always when the
// node has no resourceVersion. The cached answer is told apart from a
// fresh one by changing a node's status without changing its version,
// which an apiserver never does.
func TestObservationsDecodeOnlyChangedNodes(t *testing.T) {
	target := cm("new")
	active := &corev1.NodeConfigStatus{Assigned: target, Active: target}
	failed := &corev1.NodeConfigStatus{Assigned: target, Active: cm("old"), Error: status.ValidateError}
	node := func(rv string, st *corev1.NodeConfigStatus) *corev1.Node {
		n := readyNode("n1", nil)
		n.ResourceVersion = rv
		n.Annotations = map[string]string{}
		for key, v := range map[string]any{source.AssignedAnnotation: target, source.StatusAnnotation: st} {
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			n.Annotations[key] = string(b)
		}
		return n
	}
	running := Observed{Assigned: true, Running: true, Ready: true, Schedulable: true}
	failing := Observed{Assigned: true, Error: status.ValidateError, Ready: true, Schedulable: true}
	notAssigned := Observed{Holds: target, Ready: true, Schedulable: true}

	var c observations
	steps := []struct {
		name   string
		node   *corev1.Node
		target *corev1.NodeConfigSource
		want   Observed
	}{
		{"first sight is observed", node("1", active), target, running},
		{"same version is answered from the cache", node("1", failed), target, running},
		{"a new version is observed", node("2", failed), target, failing},
		{"another target is observed", node("2", failed), cm("other"), notAssigned},
		{"back to the first target is observed again", node("2", failed), target, failing},
		{"no version is always observed", node("", active), target, running},
		{"and again", node("", failed), target, failing},
	}
	for _, s := range steps {
		got, err := c.observe(s.node, s.target, nil)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("%s: observed (-want +got):\n%s", s.name, diff)
		}
	}
}
