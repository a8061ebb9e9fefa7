package rollout

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// TestResolve: a rollout over a selector covers the nodes it selects and
// the ones it started, selected still or not, those first, in the order it
// started them; an undo covers the
// nodes the undone rollout's marks name, and its own, each with the
// target its mark gives; a rollout that lists its nodes is left as it is.
func TestResolve(t *testing.T) {
	t1, t2 := metav1.NewMicroTime(t0), metav1.NewMicroTime(t0.Add(time.Second))
	pool := map[string]string{"pool": "a"}
	oldPin := source.NewPin(cm("old"), []byte("old"), []string{"security"})
	r := New(source.DefaultNamespace, "r1", Spec{Config: cm("new"), Selector: "pool=a", MaxUnavailable: intstr.FromInt32(1)})
	r.UID = r1UID
	nodes := []*corev1.Node{
		readyNode("a", pool),
		withMark(t, readyNode("b", pool), &Mark{Rollout: "kube-system/r1", UID: r1UID, Previous: cm("old"), PreviousPin: oldPin, Cordoned: true, Started: t2}),
		readyNode("c", nil),
		withMark(t, readyNode("d", pool), &Mark{Rollout: "kube-system/r1", UID: r1UID, Started: t1}),
		withMark(t, readyNode("e", nil), &Mark{Rollout: "kube-system/r1", UID: r1UID, Started: t1}),    // left the selector
		withMark(t, readyNode("f", nil), &Mark{Rollout: "kube-system/r0", UID: "uid-r0", Started: t1}), // another rollout's
	}
	got, err := Resolve(r, nodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	// e left the selector after r started it: r still covers it.
	if diff := cmp.Diff([]string{"d", "e", "b", "a"}, got.Spec.Nodes); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if got.Spec.Drain != nil || r.Spec.Nodes != nil {
		t.Errorf("drains %v, and the rollout resolved lists %v; want neither", got.Spec.Drain, r.Spec.Nodes)
	}
	r.Spec.DrainAll = true
	if got, _ := Resolve(r, nodes, nil); !cmp.Equal(got.Spec.Drain, got.Spec.Nodes) {
		t.Errorf("with drainAll it drains %v, want every node %v", got.Spec.Drain, got.Spec.Nodes)
	}

	undo := New(source.DefaultNamespace, "u", Spec{UndoOf: "r1", UndoOfUID: r1UID, MaxUnavailable: intstr.FromInt32(1), AllowUnsafe: []string{"security"}})
	undo.UID = "uid-u"
	nodes[3] = withMark(t, nodes[3], &Mark{Rollout: "kube-system/u", UID: "uid-u", Previous: cm("new"), Target: cm("older"), Started: t2})
	got, err = Resolve(undo, nodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := undo.Spec
	want.Nodes = []string{"e", "b", "d"}
	want.Targets = Targets{"b": cm("old"), "d": cm("older"), "e": nil}
	want.TargetPins = TargetPins{"b": oldPin}
	if diff := cmp.Diff(want, got.Spec); diff != "" {
		t.Errorf("undo (-want +got):\n%s", diff)
	}
	// A pin that allows more than the undo's author was admitted for is
	// left out: the node's agent refuses a target without one.
	undo.Spec.AllowUnsafe = nil
	if got, _ := Resolve(undo, nodes, nil); got.Spec.TargetPins["b"] != nil {
		t.Errorf("b's pin %v, want none: it allows security, which the undo does not", got.Spec.TargetPins["b"])
	}

	listed := New(source.DefaultNamespace, "l", Spec{Nodes: []string{"c"}, Selector: "pool=a"})
	if got, _ := Resolve(listed, nodes, nil); got != listed {
		t.Errorf("a rollout that lists its nodes resolved to %+v", got.Spec)
	}
}

// TestRunOverASelectorAndItsUndo: a rollout planned over a selector stores
// no node, rolls out to the nodes the selector picks and to no other, and
// its undo, planned from the nodes' marks, sends each back.
func TestRunOverASelectorAndItsUndo(t *testing.T) {
	client, names := newFleet(t, 6)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range names[:4] {
		node, err := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node.Labels = map[string]string{"pool": "a"}
		if _, err := client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	agents := newAgents(client, 20*time.Millisecond)
	agents.run(ctx, t)
	facts := func(selector string) Facts {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			t.Fatal(err)
		}
		return Facts{Nodes: list.Items, Payload: []byte("good")}
	}
	r, _, err := Plan(Request{Namespace: source.DefaultNamespace, Name: "r1", Config: cm("good"), Selector: "pool=a", BySelector: true,
		MaxUnavailable: ptr.To(intstr.FromInt32(2))}, facts("pool=a"))
	if err != nil {
		t.Fatal(err)
	}
	store := newStore()
	createRollout(t, store, r)
	if stored, err := store.Get(ctx, "r1"); err != nil || Lists(stored) {
		t.Fatalf("stored rollout: %v, lists %v; want no nodes", err, stored.Spec.Nodes)
	}
	got, err := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond})
	if err != nil || got.Status.State != Done {
		t.Fatalf("Run: %v; want Done", err)
	}
	if got.Status.Counts.Updated != 4 {
		t.Errorf("counts %+v, want 4 updated", got.Status.Counts)
	}
	for i, n := range names {
		m := markOn(ctx, t, client, n)
		if i < 4 && (m == nil || m.UID != "uid-r1") || i >= 4 && m != nil {
			t.Errorf("node %s marked %+v; want r1's mark on the nodes of pool=a only", n, m)
		}
	}
	if stored, err := store.Get(ctx, "r1"); err != nil || Lists(stored) {
		t.Fatalf("stored rollout after the run: %v, lists %v; want no nodes", err, stored.Spec.Nodes)
	}

	orig, err := store.Get(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	u, _, err := Plan(Request{Namespace: source.DefaultNamespace, Name: "u", UndoOf: orig}, facts(""))
	if err != nil {
		t.Fatal(err)
	}
	createRollout(t, store, u)
	if got, err = Run(ctx, client, store, "u", Options{Resync: 50 * time.Millisecond}); err != nil || got.Status.State != Done {
		t.Fatalf("Run the undo: %v; want Done", err)
	}
	for _, n := range names[:4] {
		node, err := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if src, _, _ := source.Assigned(node); src != nil {
			t.Errorf("node %s assigned %s after the undo, want its local config", n, DescribeTarget(src))
		}
		if m := markOn(ctx, t, client, n); m == nil || m.UID != "uid-u" || !source.Equal(m.Previous, cm("good")) || m.Target != nil {
			t.Errorf("node %s marked %+v after the undo; want the undo's, from good, to its local config", n, m)
		}
	}
}
