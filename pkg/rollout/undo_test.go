package rollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

func TestUndoSpec(t *testing.T) {
	now := metav1.NowMicro()
	orig := New("kube-system", "r1", Spec{
		Config:         cm("new"),
		Nodes:          []string{"n1", "n2", "n3", "n4", "n5"},
		MaxUnavailable: intstr.FromString("50%"),
		Canary:         1,
		Drain:          []string{"n2"},
	})
	orig.Status.Nodes = map[string]NodeStatus{
		"n1": {Phase: Succeeded, Previous: cm("old"), PreviousPin: source.NewPin(cm("old"), []byte("old bytes"), nil), Started: &now},
		"n2": {Phase: Failed, Started: &now}, // was on its local config
		"n3": {Phase: Skipped},
		"n4": {Phase: InProgress, Previous: cm("older"), Started: &now},
		"n5": {Phase: Waiting, Queued: true, Previous: cm("old")}, // maybe started, not recorded so yet
	}
	got, err := UndoSpec(orig)
	if err != nil {
		t.Fatal(err)
	}
	want := Spec{
		Targets:        map[string]*corev1.NodeConfigSource{"n1": cm("old"), "n2": nil, "n4": cm("older"), "n5": cm("old")},
		TargetPins:     map[string]*source.Pin{"n1": source.NewPin(cm("old"), []byte("old bytes"), nil)},
		Nodes:          []string{"n1", "n2", "n4", "n5"},
		MaxUnavailable: intstr.FromString("50%"),
		Canary:         1,
		Drain:          []string{"n2"},
		UndoOf:         "r1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for n, wantTarget := range map[string]*corev1.NodeConfigSource{"n1": cm("old"), "n2": nil} {
		target, _ := got.Target(n)
		if diff := cmp.Diff(wantTarget, target); diff != "" {
			t.Errorf("target of %s (-want +got):\n%s", n, diff)
		}
	}

	untouched := New("kube-system", "r2", Spec{Config: cm("new"), Nodes: []string{"n1", "n2"}})
	if _, err := UndoSpec(untouched); errString(err) != "nothing to undo: the rollout started no node" {
		t.Errorf("undo of an untouched rollout: %v", err)
	}
	untouched.Status.Nodes = map[string]NodeStatus{"n2": {Phase: Waiting, Queued: true}}
	if _, err := UndoSpec(untouched); errString(err) != "nothing to undo: the rollout started no node" {
		t.Errorf("undo of a rollout that only queued a node: %v", err)
	}
}
