package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// countWrites counts the writes of the rollouts of store.
func countWrites(store *Store) *int {
	n := new(int)
	store.Client.(*dynamicfake.FakeDynamicClient).PrependReactor("update", "nodeconfigrollouts", func(k8stesting.Action) (bool, runtime.Object, error) {
		*n++
		return false, nil, nil
	})
	return n
}

// TestExecuteWritesTheStatus: a pass writes the rollout at once when its
// state, wave, soak or reason changed (Decision.Write) or it is final,
// and when only its counts changed, once the last write is
// Options.StatusInterval old; never when nothing changed.
func TestExecuteWritesTheStatus(t *testing.T) {
	ctx := context.Background()
	tests := map[string]struct {
		// since is how long ago this driver last wrote the rollout.
		since time.Duration
		// done lists the nodes the pass found done.
		done        []string
		write       bool
		final       bool
		wantWrite   bool
		wantCounts  Counts
		wantResults bool
	}{
		"counts changed, within the interval": {since: 59 * time.Second, done: []string{"n1"}, wantCounts: Counts{Waiting: 3}},
		"counts changed, after the interval":  {since: time.Minute, done: []string{"n1"}, wantWrite: true, wantCounts: Counts{Waiting: 2, Updated: 1}},
		"the state, wave, soak or reason changed": {
			write: true, wantWrite: true, wantCounts: Counts{Waiting: 3},
		},
		"the rollout is final": {
			final: true, done: []string{"n1", "n2", "n3"}, wantWrite: true, wantCounts: Counts{Updated: 3}, wantResults: true,
		},
		"nothing changed, after the interval": {since: time.Hour, wantCounts: Counts{Waiting: 3}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			store := newStore()
			r := New(source.DefaultNamespace, "r1", Spec{Config: cm("good"), Nodes: fleetOf(3), MaxUnavailable: intstr.FromInt32(1)})
			r.Status = Status{State: Running, Counts: Counts{Waiting: 3}}
			createRollout(t, store, r)
			cur, err := store.Get(ctx, "r1")
			if err != nil {
				t.Fatal(err)
			}
			writes := countWrites(store)
			clock := testingclock.NewFakeClock(t0)
			e := &engine{client: fake.NewClientset(), store: store, opts: Options{Clock: clock, StatusInterval: time.Minute, Parallel: 1},
				cur: cur, rv: cur.ResourceVersion, assigned: map[string]bool{}, marks: map[string]*Mark{},
				written: t0.Add(-tc.since)}
			d := Decision{Rollout: cur.DeepCopy(), Write: tc.write, Final: tc.final}
			d.Rollout.Status.Nodes = map[string]NodeStatus{}
			for _, n := range tc.done {
				d.Rollout.Status.Nodes[n] = NodeStatus{Phase: Succeeded, Marked: true}
			}
			if tc.final {
				d.Rollout.Status.State = Done
			}
			finished, err := e.execute(ctx, d, nil, nil, t0)
			if err != nil || finished != tc.wantResults {
				t.Fatalf("execute: %v, %v; want %v, nil", finished, err, tc.wantResults)
			}
			if (*writes > 0) != tc.wantWrite {
				t.Errorf("%d writes, want a write: %v", *writes, tc.wantWrite)
			}
			got, err := store.Get(ctx, "r1")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantCounts, got.Status.Counts); diff != "" {
				t.Errorf("stored counts (-want +got):\n%s", diff)
			}
			if tc.wantWrite && !e.written.Equal(t0) {
				t.Errorf("last write at %v, want the pass's %v", e.written, t0)
			}
		})
	}
}

// TestRunWritesTheRolloutOnlyWhenItsStateChanges: over a rollout whose
// counts change at every node, the driver writes the rollout when it takes
// it up, when it enters a wave and when it is done, and for its counts
// only every StatusInterval.
func TestRunWritesTheRolloutOnlyWhenItsStateChanges(t *testing.T) {
	tests := map[string]struct {
		interval time.Duration
		// want: the state and wave of each write; nil: more writes than
		// the changes of state.
		want []string
	}{
		"an hour between writes of counts":      {interval: time.Hour, want: []string{"Running/0", "Running/1", "Done/1"}},
		"a nanosecond between writes of counts": {interval: time.Nanosecond},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fleet, names := newFleet(t, 8)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			agents := newAgents(fleet, 10*time.Millisecond)
			agents.run(ctx, t)
			store := startRollout(t, fleet, Spec{Config: cm("good"), Nodes: names, Canary: 1, MaxUnavailable: intstr.FromInt32(3)})
			var writes []string
			store.Client.(*dynamicfake.FakeDynamicClient).PrependReactor("update", "nodeconfigrollouts", func(a k8stesting.Action) (bool, runtime.Object, error) {
				data, err := json.Marshal(a.(k8stesting.UpdateAction).GetObject())
				if err != nil {
					t.Error(err)
					return false, nil, nil
				}
				var r Rollout
				if err := json.Unmarshal(data, &r); err != nil {
					t.Error(err)
				}
				writes = append(writes, fmt.Sprintf("%s/%d", r.Status.State, r.Status.Wave))
				return false, nil, nil
			})
			if r, err := Run(ctx, fleet, store, "r1", Options{Resync: 50 * time.Millisecond, StatusInterval: tc.interval}); err != nil || r.Status.State != Done {
				t.Fatalf("Run: %v; want Done", err)
			}
			if tc.want == nil {
				if len(writes) <= 3 {
					t.Errorf("writes %v: want the counts written as they change", writes)
				}
				return
			}
			if diff := cmp.Diff(tc.want, writes); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTakeStateCountsTheNodesFromTheirMarks: the write that records an
// abort holds the counts of the nodes as their marks and carriers show
// them.
func TestTakeStateCountsTheNodesFromTheirMarks(t *testing.T) {
	ctx := context.Background()
	store := newStore()
	r := New(source.DefaultNamespace, "r1", Spec{Config: cm("good"), Nodes: fleetOf(4), MaxUnavailable: intstr.FromInt32(2)})
	r.Status.State = Running
	createRollout(t, store, r)
	aborted, err := store.Request(ctx, "r1", Aborted, Running, Paused)
	if err != nil {
		t.Fatal(err)
	}
	e := &engine{store: store, opts: Options{Clock: testingclock.NewFakeClock(t0)}, cur: aborted, rv: aborted.ResourceVersion,
		assigned: map[string]bool{}, marks: map[string]*Mark{}}
	observed := map[string]Observed{"n1": ours(running), "n2": ours(applying), "n3": running, "n4": idle}
	if ok, err := e.takeState(ctx, aborted, observed, t0); !ok || err != nil {
		t.Fatalf("takeState: %v, %v", ok, err)
	}
	got, err := store.Get(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	want := Status{State: Aborted, Reason: "aborted (spec.aborted)", Counts: Counts{Waiting: 1, InProgress: 1, Updated: 1, Skipped: 1}}
	got.Status.LastUpdate = metav1.Time{}
	if diff := cmp.Diff(want, got.Status); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

// TestRunRefusesALegacyRollout: a rollout that an earlier dkc drove, with
// each node's progress in its status, is not driven by this one (its
// nodes carry no marks): Run says so and patches no node. One that ended
// is left as it is.
func TestRunRefusesALegacyRollout(t *testing.T) {
	tests := map[string]struct {
		state   State
		wantErr error
	}{
		"running": {state: Running, wantErr: ErrLegacy},
		"done":    {state: Done},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fleet, names := newFleet(t, 2)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r := New(source.DefaultNamespace, "r1", Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(1)})
			r.Status.State = tc.state
			r.Status.LegacyNodes = json.RawMessage(`{"n1":{"phase":"InProgress","previous":0}}`)
			store := newStore()
			createRollout(t, store, r)
			client := &patchCounter{Interface: fleet}
			_, err := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond})
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("Run: %v, want %v", err, tc.wantErr)
			}
			client.mu.Lock()
			defer client.mu.Unlock()
			if len(client.tried) > 0 {
				t.Errorf("patched %v", client.tried)
			}
		})
	}
}

// TestExecuteDoesNotHaltWhenItsTenureEnds: a driver whose tenure of the
// rollout's Lease ends (its context is canceled) while it starts nodes
// stops starting them, and leaves the rollout as it is: the end of its
// tenure is no node's failure, and the next holder picks the rollout up.
func TestExecuteDoesNotHaltWhenItsTenureEnds(t *testing.T) {
	fleet, names := newFleet(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := &patchCounter{Interface: fleet, assigning: func(string) { cancel() }}
	store := newStore()
	r := New(source.DefaultNamespace, "r1", Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(3)})
	r.Status.State = Running
	createRollout(t, store, r)
	cur, err := store.Get(context.Background(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]*corev1.Node{}
	for _, n := range names {
		node, err := fleet.CoreV1().Nodes().Get(context.Background(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nodes[n] = node
	}
	d, err := decide(cur, map[string]Observed{"n1": idle, "n2": idle, "n3": idle}, nodes, nil, t0, Alerts{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Start) != 3 {
		t.Fatalf("decide started %v, want the three nodes", d.Start)
	}
	e := &engine{client: client, store: store, opts: Options{Clock: testingclock.NewFakeClock(t0), StatusInterval: time.Hour, Parallel: 1},
		cur: cur, rv: cur.ResourceVersion, assigned: map[string]bool{}, marks: map[string]*Mark{}, written: t0}
	_, _ = e.execute(ctx, d, nil, nodes, t0)
	client.mu.Lock()
	tried := append([]string(nil), client.tried...)
	client.mu.Unlock()
	if diff := cmp.Diff([]string{"n1"}, tried); diff != "" {
		t.Errorf("nodes patched (-want +got):\n%s", diff)
	}
	got, err := store.Get(context.Background(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.State != Running || got.Status.Reason != "" || len(got.Status.Failures) > 0 {
		t.Errorf("rollout %s %q, failures %v: want it Running, as the driver found it", got.Status.State, got.Status.Reason, got.Status.Failures)
	}
}
