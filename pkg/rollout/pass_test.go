package rollout

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

var started0 = metav1.NewMicroTime(t0)

// queuedRollout is rollout r1 over 8 nodes with a budget of 4, as stored:
// n1..n4 in progress, n5 queued with what it held (old).
func queuedRollout(t *testing.T, store *Store) *Rollout {
	t.Helper()
	r := New("kube-system", "r1", Spec{Config: cm("good"), Nodes: fleetOf(8), MaxUnavailable: intstr.FromInt32(4)})
	r.Status = Status{State: Running, Nodes: map[string]NodeStatus{"n5": {Phase: Waiting, Queued: true, Previous: cm("old")}}}
	for _, n := range fleetOf(4) {
		r.Status.Nodes[n] = NodeStatus{Phase: InProgress, Started: &started0}
	}
	createRollout(t, store, r)
	got, err := store.Get(context.Background(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestTakeStateRecordsTheQueuedNodesThisClientAssigned: an abort that comes
// while a pass assigns a queued node (its write then fails with a
// conflict) leaves that node recorded in progress by the write that
// records the abort, though its Node does not show the assignment yet, so
// that undo sends it back.
func TestTakeStateRecordsTheQueuedNodesThisClientAssigned(t *testing.T) {
	ctx := context.Background()
	store := newStore()
	queuedRollout(t, store)
	aborted, err := store.Request(ctx, "r1", Aborted, Running, Paused)
	if err != nil {
		t.Fatal(err)
	}
	e := &engine{store: store, opts: Options{Clock: clock.RealClock{}}, cur: aborted, rv: aborted.ResourceVersion,
		kick: make(chan struct{}, 1), assigned: map[string]bool{"n5": true}}
	observed := map[string]Observed{"n5": idle, "n6": idle, "n7": idle, "n8": idle}
	for _, n := range fleetOf(4) {
		observed[n] = applying
	}
	if ok, err := e.takeState(ctx, observed, t0); !ok || err != nil {
		t.Fatalf("takeState: %v, %v", ok, err)
	}
	got, err := store.Get(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.State != Aborted {
		t.Errorf("state %s, want Aborted", got.Status.State)
	}
	if rec := got.NodeStatus("n5"); rec.Phase != InProgress || rec.Queued || rec.Started == nil || !source.Equal(rec.Previous, cm("old")) {
		t.Errorf("n5 %+v, want InProgress, started, with its previous assignment old", rec)
	}
	undo, _, err := Plan(Request{Namespace: "kube-system", Name: "undo", UndoOf: got}, Facts{})
	if err != nil {
		t.Fatal(err)
	}
	spec := undo.Spec
	if !slices.Contains(spec.Nodes, "n5") {
		t.Errorf("undo covers %v, not n5", spec.Nodes)
	}
}

// TestExecuteLooksAgainBeforeItAssignsAQueuedNode: a pass assigns no queued
// node once another client has written the rollout since the pass read it
// (the operator may have paused or aborted it): it looks again first.
func TestExecuteLooksAgainBeforeItAssignsAQueuedNode(t *testing.T) {
	ctx := context.Background()
	fleet, names := newFleet(t, 8)
	client := &patchCounter{Interface: fleet}
	store := newStore()
	cur := queuedRollout(t, store)
	nodes := map[string]*corev1.Node{}
	for _, n := range names {
		node, err := fleet.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nodes[n] = node
	}
	d := Decision{Rollout: cur.DeepCopy(), Recorded: true, Dequeue: []string{"n5"}, Assign: []string{"n5"}}
	rec := d.Rollout.NodeStatus("n5")
	// The fleet's nodes hold no assignment.
	rec.Phase, rec.Queued, rec.Started, rec.Previous = InProgress, false, &started0, nil
	d.Rollout.Status.Nodes["n5"] = rec

	e := &engine{client: client, store: store, opts: Options{Clock: clock.RealClock{}, Parallel: 1}, cur: cur, rv: cur.ResourceVersion,
		kick: make(chan struct{}, 1), assigned: map[string]bool{}}
	e.delivered("another client's version")
	if finished, err := e.execute(ctx, d, nil, nodes, t0); finished || err != nil {
		t.Fatalf("execute: %v, %v", finished, err)
	}
	if len(client.tried) > 0 {
		t.Errorf("assigned %v though another client wrote the rollout since the pass read it", client.tried)
	}
	select {
	case <-e.kick:
	default:
		t.Error("no next pass asked for")
	}

	e.mu.Lock()
	e.stale = false
	e.mu.Unlock()
	if finished, err := e.execute(ctx, d, nil, nodes, t0); finished || err != nil {
		t.Fatalf("execute: %v, %v", finished, err)
	}
	if !slices.Equal(client.tried, []string{"n5"}) {
		t.Errorf("assigned %v, want n5 from the queue", client.tried)
	}
}
