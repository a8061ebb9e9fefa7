package rollout

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// What a node's carrier and conditions can show a pass.
var (
	// idle: not assigned the target, Ready and schedulable.
	idle = Observed{Ready: true, Schedulable: true}
	// applying: assigned the target, restarting or in its health gate.
	applying = Observed{Assigned: true, Schedulable: true}
	// running: runs the target, Ready and schedulable.
	running = Observed{Assigned: true, Running: true, Ready: true, Schedulable: true}
	// rolledBack: assigned the target, which its agent rolled back.
	rolledBack = Observed{Assigned: true, Error: "rolled back", Ready: true, Schedulable: true}
	// notReady: not assigned the target, and NotReady.
	notReady = Observed{Schedulable: true}
	// unschedulable: not assigned the target, and cordoned.
	unschedulable = Observed{Ready: true}
)

// statusOf compares a Decision's Rollout by the rollout's own status:
// each node's record is checked apart.
var statusOf = cmp.Transformer("status", func(r *Rollout) Status {
	return Status{State: r.Status.State, Reason: r.Status.Reason, Wave: r.Status.Wave, SoakSince: r.Status.SoakSince}
})

// runningAt is a Running rollout in wave, soaking since soak (nil: not).
func runningAt(wave int, soak *metav1.Time) *Rollout {
	return &Rollout{Status: Status{State: Running, Wave: wave, SoakSince: soak}}
}

// halted is a rollout halted for reason in wave 0.
func halted(reason string) *Rollout {
	return &Rollout{Status: Status{State: Halted, Reason: reason}}
}

// fleetOf names n nodes n1...nN.
func fleetOf(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i+1)
	}
	return names
}

// decideInput is a pass's view of a rollout, valid by default: a Running
// rollout over five idle nodes with one canary and a budget of one.
type decideInput struct {
	spec     Spec
	status   Status
	observed map[string]Observed
	// gone lists nodes that left the cluster.
	gone []string
	// nodes holds the Nodes that differ from a Ready node holding no
	// assignment.
	nodes    map[string]*corev1.Node
	assigned map[string]bool
	// unqueued: the cluster cannot store a queue.
	unqueued bool
	now      time.Time
}

var t0 = time.Date(2026, 11, 23, 5, 20, 0, 0, time.UTC)

func (in decideInput) decide(t *testing.T) Decision {
	t.Helper()
	spec := in.spec
	if spec.Nodes == nil {
		spec.Nodes = fleetOf(5)
	}
	if spec.MaxUnavailable == (intstr.IntOrString{}) {
		spec.MaxUnavailable = intstr.FromInt32(1)
	}
	r := New(source.DefaultNamespace, "r1", spec)
	r.Status = in.status
	if r.Status.State == "" {
		r.Status.State = Running
	}
	observed, nodes := map[string]Observed{}, map[string]*corev1.Node{}
	for _, n := range spec.Nodes {
		if slices.Contains(in.gone, n) {
			continue
		}
		observed[n], nodes[n] = idle, readyNode(n, nil)
		if o, ok := in.observed[n]; ok {
			observed[n] = o
		}
		if node, ok := in.nodes[n]; ok {
			nodes[n] = node
		}
	}
	now := in.now
	if now.IsZero() {
		now = t0
	}
	d, err := decide(r, observed, nodes, in.assigned, !in.unqueued, now)
	if err != nil {
		t.Fatalf("decide: %v", err)
	}
	return d
}

// soakSince is a soak that began ago before t0.
func soakSince(ago time.Duration) *metav1.Time {
	return &metav1.Time{Time: t0.Add(-ago)}
}

func TestDecide(t *testing.T) {
	oneCanaryBudget2 := Spec{Canary: 1, MaxUnavailable: intstr.FromInt32(2)}
	withSoak := Spec{Canary: 1, MaxUnavailable: intstr.FromInt32(2), Soak: metav1.Duration{Duration: time.Minute}}
	canaryDone := map[string]NodeStatus{"n1": {Phase: Succeeded}}
	heldOld, err := source.PatchedNode(readyNode("n1", nil), mustAssignPatch(t, cm("old")))
	if err != nil {
		t.Fatal(err)
	}

	tests := map[string]struct {
		in   decideInput
		want Decision
		// wantNodes holds the records expected of some nodes, times aside.
		wantNodes map[string]NodeStatus
	}{
		"the canary starts first, alone, recorded before it is assigned": {
			in:        decideInput{spec: oneCanaryBudget2},
			want:      Decision{Rollout: runningAt(0, nil), Write: true, Start: []string{"n1"}, Assign: []string{"n1"}},
			wantNodes: map[string]NodeStatus{"n1": {Phase: InProgress}, "n2": {Phase: Waiting}},
		},
		"no node after the canary starts before the canary is done, whatever the budget": {
			in: decideInput{spec: oneCanaryBudget2,
				status:   Status{Nodes: map[string]NodeStatus{"n1": {Phase: InProgress}}},
				observed: map[string]Observed{"n1": applying}},
			want: Decision{Rollout: runningAt(0, nil)},
		},
		"a failed node halts before any node starts": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(3)},
				status:   Status{Nodes: map[string]NodeStatus{"n1": {Phase: InProgress}}},
				observed: map[string]Observed{"n1": rolledBack}},
			want:      Decision{Rollout: halted("node/n1: rolled back"), Recorded: true, Final: true},
			wantNodes: map[string]NodeStatus{"n1": {Phase: Failed, Error: "rolled back"}, "n2": {Phase: Waiting}},
		},
		"a failed node halts before a drained node that passed its gate is uncordoned": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(2), Drain: []string{"n1"}},
				status:   Status{Nodes: map[string]NodeStatus{"n1": {Phase: InProgress, Cordoned: true}, "n2": {Phase: InProgress}}},
				observed: map[string]Observed{"n1": {Assigned: true, Running: true, Ready: true}, "n2": rolledBack}},
			want:      Decision{Rollout: halted("node/n2: rolled back"), Recorded: true, Final: true},
			wantNodes: map[string]NodeStatus{"n1": {Phase: Succeeded, Cordoned: true}},
		},
		"a node assigned by hand outside the rollout while in progress halts it": {
			in: decideInput{
				status:   Status{Nodes: map[string]NodeStatus{"n1": {Phase: InProgress}}},
				observed: map[string]Observed{"n1": {Holds: cm("other"), Ready: true, Schedulable: true}}},
			want: Decision{Rollout: halted("node/n1: " + changedOutside(cm("other"), nil)), Recorded: true, Final: true},
		},
		"a drained node that passed its gate is uncordoned, and holds its slot until it shows schedulable": {
			in: decideInput{spec: Spec{Canary: 1, MaxUnavailable: intstr.FromInt32(1), Drain: []string{"n1"}},
				status:   Status{Nodes: map[string]NodeStatus{"n1": {Phase: InProgress, Cordoned: true}}},
				observed: map[string]Observed{"n1": {Assigned: true, Running: true, Ready: true}}},
			want:      Decision{Rollout: runningAt(1, nil), Recorded: true, Write: true, Uncordon: []string{"n1"}},
			wantNodes: map[string]NodeStatus{"n1": {Phase: Succeeded}, "n2": {Phase: Waiting}},
		},
		"the rollout is done once every node is done and uncordoned": {
			in: decideInput{spec: Spec{Nodes: fleetOf(2), Drain: []string{"n2"}},
				status:   Status{Wave: 1, Nodes: map[string]NodeStatus{"n1": {Phase: Succeeded}, "n2": {Phase: InProgress, Cordoned: true}}},
				observed: map[string]Observed{"n1": running, "n2": {Assigned: true, Running: true, Ready: true}}},
			want: Decision{Rollout: &Rollout{Status: Status{State: Done, Wave: 1}}, Recorded: true, Write: true, Final: true, Uncordon: []string{"n2"}},
		},
		"nodes that already run the target are skipped and take no slot": {
			in: decideInput{spec: Spec{Nodes: fleetOf(3), Canary: 1},
				observed: map[string]Observed{"n1": running, "n2": running}},
			want:      Decision{Rollout: runningAt(1, nil), Recorded: true, Write: true, Start: []string{"n3"}, Assign: []string{"n3"}},
			wantNodes: map[string]NodeStatus{"n1": {Phase: Skipped}, "n2": {Phase: Skipped}},
		},
		"a node that left the cluster is skipped": {
			in:        decideInput{spec: Spec{Nodes: fleetOf(2), Canary: 1}, gone: []string{"n1"}},
			want:      Decision{Rollout: runningAt(1, nil), Recorded: true, Write: true, Start: []string{"n2"}, Assign: []string{"n2"}},
			wantNodes: map[string]NodeStatus{"n1": {Phase: Skipped, Error: "node not found"}},
		},
		"the budget bounds the nodes started at once, taken in rollout order": {
			in:   decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(2)}},
			want: Decision{Rollout: runningAt(0, nil), Write: true, Start: []string{"n1", "n2"}, Assign: []string{"n1", "n2"}},
		},
		"NotReady nodes the rollout did not start count against the budget": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(2)},
				observed: map[string]Observed{"n4": notReady}},
			want: Decision{Rollout: runningAt(0, nil), Write: true, Start: []string{"n1"}, Assign: []string{"n1"}},
		},
		"cordoned nodes count against the budget": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(2)},
				observed: map[string]Observed{"n2": unschedulable, "n5": unschedulable}},
			want: Decision{Rollout: runningAt(0, nil)},
		},
		"a NotReady node of the wave takes its own slot when it starts, and no other": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(2)},
				observed: map[string]Observed{"n1": notReady}},
			want: Decision{Rollout: runningAt(0, nil), Write: true, Start: []string{"n1", "n2"}, Assign: []string{"n1", "n2"}},
		},
		"a node assigned the target by hand before its turn holds a slot": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(2)},
				observed: map[string]Observed{"n3": applying}},
			want:      Decision{Rollout: runningAt(0, nil), Recorded: true, Write: true, Start: []string{"n1"}, Assign: []string{"n1"}},
			wantNodes: map[string]NodeStatus{"n3": {Phase: InProgress}},
		},
		"a node a dead client recorded and did not assign is assigned, and holds its slot": {
			in: decideInput{
				status: Status{Nodes: map[string]NodeStatus{"n1": {Phase: InProgress}}}},
			want: Decision{Rollout: runningAt(0, nil), Assign: []string{"n1"}},
		},
		"a node this client assigned is not assigned again while its Node does not show it yet": {
			in: decideInput{
				status:   Status{Nodes: map[string]NodeStatus{"n1": {Phase: InProgress}}},
				assigned: map[string]bool{"n1": true}},
			want: Decision{Rollout: runningAt(0, nil)},
		},
		"a node is recorded with the assignment it held, to undo to, and cordoned when it is drained": {
			in: decideInput{spec: Spec{Drain: []string{"n1"}}, nodes: map[string]*corev1.Node{"n1": heldOld},
				observed: map[string]Observed{"n1": {Holds: cm("old"), Ready: true, Schedulable: true}}},
			want:      Decision{Rollout: runningAt(0, nil), Write: true, Start: []string{"n1"}, Assign: []string{"n1"}},
			wantNodes: map[string]NodeStatus{"n1": {Phase: InProgress, Previous: cm("old"), Cordoned: true}},
		},
		"with no soak, a slot freed by a finished node goes at once to the next node, without waiting for the rest of its wave": {
			in: decideInput{spec: oneCanaryBudget2,
				status:   Status{Wave: 1, Nodes: map[string]NodeStatus{"n1": {Phase: Succeeded}, "n2": {Phase: InProgress}, "n3": {Phase: InProgress}}},
				observed: map[string]Observed{"n1": running, "n2": running, "n3": applying}},
			want:      Decision{Rollout: runningAt(1, nil), Recorded: true, Write: true, Start: []string{"n4"}, Assign: []string{"n4"}},
			wantNodes: map[string]NodeStatus{"n2": {Phase: Succeeded}, "n3": {Phase: InProgress}, "n4": {Phase: InProgress}, "n5": {Phase: Waiting}},
		},
		"with no soak, the canary still goes first and alone": {
			in: decideInput{spec: oneCanaryBudget2,
				status:   Status{Nodes: map[string]NodeStatus{"n1": {Phase: InProgress}}},
				observed: map[string]Observed{"n1": applying}},
			want: Decision{Rollout: runningAt(0, nil)},
		},
		"with no soak and no canary, the budget alone bounds the nodes under way": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(3)},
				status:   Status{Nodes: map[string]NodeStatus{"n1": {Phase: Succeeded}, "n2": {Phase: InProgress}}},
				observed: map[string]Observed{"n1": running, "n2": applying}},
			want: Decision{Rollout: runningAt(0, nil), Write: true, Start: []string{"n3", "n4"}, Assign: []string{"n3", "n4"}},
		},
		"with a soak, the next wave waits for every node of the wave before": {
			in: decideInput{spec: withSoak,
				status:   Status{Wave: 1, Nodes: map[string]NodeStatus{"n1": {Phase: Succeeded}, "n2": {Phase: Succeeded}, "n3": {Phase: InProgress}}},
				observed: map[string]Observed{"n1": running, "n2": running, "n3": applying}},
			want: Decision{Rollout: runningAt(1, nil)},
		},
		"a soak begins when every node before the next wave is done and healthy": {
			in: decideInput{spec: withSoak, status: Status{Nodes: canaryDone},
				observed: map[string]Observed{"n1": running}},
			want: Decision{Rollout: runningAt(0, &metav1.Time{Time: t0}), Write: true, Wake: t0.Add(time.Minute)},
		},
		"a wave starts only after the soak since the previous wave was last all healthy": {
			in: decideInput{spec: withSoak, status: Status{Nodes: canaryDone, SoakSince: soakSince(59 * time.Second)},
				observed: map[string]Observed{"n1": running}},
			want: Decision{Rollout: runningAt(0, soakSince(59*time.Second)), Wake: t0.Add(time.Second)},
		},
		"a wave starts once the soak has passed": {
			in: decideInput{spec: withSoak, status: Status{Nodes: canaryDone, SoakSince: soakSince(time.Minute)},
				observed: map[string]Observed{"n1": running}},
			want: Decision{Rollout: runningAt(1, nil), Write: true, Start: []string{"n2", "n3"}, Assign: []string{"n2", "n3"}},
		},
		"a node of an earlier wave turning NotReady breaks the soak": {
			in: decideInput{spec: withSoak, status: Status{Nodes: canaryDone, SoakSince: soakSince(30 * time.Second)},
				observed: map[string]Observed{"n1": {Assigned: true, Running: true, Schedulable: true}}},
			want: Decision{Rollout: runningAt(0, nil), Write: true},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := tc.in.decide(t)
			if diff := cmp.Diff(tc.want, d, statusOf); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			for n, want := range tc.wantNodes {
				if diff := cmp.Diff(want, d.Rollout.NodeStatus(n), cmpopts.IgnoreFields(NodeStatus{}, "Started", "Finished")); diff != "" {
					t.Errorf("node %s (-want +got):\n%s", n, diff)
				}
			}
		})
	}
}

func mustAssignPatch(t *testing.T, src *corev1.NodeConfigSource) []byte {
	t.Helper()
	patch, err := source.AssignPatch(source.Annotation, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	return patch
}

// TestDecideStampsTimes checks that a pass stamps what it decides with its
// clock: a node started with the pass's time, a soak with its beginning.
func TestDecideStampsTimes(t *testing.T) {
	clock := testingclock.NewFakeClock(t0)
	in := decideInput{spec: Spec{Nodes: fleetOf(2), Canary: 1, Soak: metav1.Duration{Duration: time.Minute}}}
	in.now = clock.Now()
	d := in.decide(t)
	if got := d.Rollout.NodeStatus("n1").Started; got == nil || !got.Time.Equal(t0) {
		t.Errorf("n1 started %v, want %v", got, t0)
	}

	clock.Step(10 * time.Second)
	in.status, in.observed, in.now = d.Rollout.Status, map[string]Observed{"n1": running}, clock.Now()
	d = in.decide(t)
	if got := d.Rollout.NodeStatus("n1").Finished; got == nil || !got.Time.Equal(t0.Add(10*time.Second)) {
		t.Errorf("n1 finished %v, want %v", got, t0.Add(10*time.Second))
	}
	if got, want := d.Wake, clock.Now().Add(time.Minute); !got.Equal(want) {
		t.Errorf("wake %v, want the soak's end %v", got, want)
	}
}

func TestQueueSize(t *testing.T) {
	for budget, want := range map[int]int{1: 0, 3: 0, 4: 1, 8: 2, 100: 25, 500: 125} {
		if got := Queue(budget); got != want {
			t.Errorf("Queue(%d) = %d, want %d", budget, got, want)
		}
	}
}

// TestDecideQueue checks the queue of a rollout with a budget of 8 (a queue
// of 2) over 16 nodes: the nodes after the budget's are recorded before
// their turn, with what they hold, and a freed slot goes to the first of
// them with no write before its assignment.
func TestDecideQueue(t *testing.T) {
	spec := Spec{Nodes: fleetOf(16), MaxUnavailable: intstr.FromInt32(8)}
	// under way: n1..n8 in progress and applying, n9 and n10 queued.
	underWay := func() (Status, map[string]Observed) {
		st := Status{Nodes: map[string]NodeStatus{}}
		obs := map[string]Observed{}
		for _, n := range fleetOf(8) {
			st.Nodes[n] = NodeStatus{Phase: InProgress}
			obs[n] = applying
		}
		for _, n := range []string{"n9", "n10"} {
			st.Nodes[n] = NodeStatus{Phase: Waiting, Queued: true}
		}
		return st, obs
	}
	heldOther, err := source.PatchedNode(readyNode("n9", nil), mustAssignPatch(t, cm("other")))
	if err != nil {
		t.Fatal(err)
	}

	tests := map[string]struct {
		in        func() decideInput
		want      Decision
		wantNodes map[string]NodeStatus
		// started lists nodes that must have a start time, besides the
		// dequeued ones: undo takes only started nodes back.
		started []string
	}{
		"the first pass starts the budget's nodes and queues the next, in one write before any assignment": {
			in: func() decideInput { return decideInput{spec: spec} },
			want: Decision{Rollout: runningAt(0, nil), Write: true,
				Start: fleetOf(8), Queue: []string{"n9", "n10"}, Assign: fleetOf(8)},
			wantNodes: map[string]NodeStatus{"n8": {Phase: InProgress}, "n9": {Phase: Waiting, Queued: true}, "n11": {Phase: Waiting}},
		},
		"a freed slot goes to the first queued node, assigned before any write; the queue is topped up once half of it has gone": {
			in: func() decideInput {
				st, obs := underWay()
				obs["n1"] = running
				return decideInput{spec: spec, status: st, observed: obs}
			},
			want: Decision{Rollout: runningAt(0, nil), Recorded: true, Write: true,
				Dequeue: []string{"n9"}, Queue: []string{"n11"}, Assign: []string{"n9"}},
			wantNodes: map[string]NodeStatus{"n1": {Phase: Succeeded}, "n9": {Phase: InProgress}, "n10": {Phase: Waiting, Queued: true}, "n11": {Phase: Waiting, Queued: true}},
		},
		"with more than half of the queue left, a dequeued node needs no write at all": {
			in: func() decideInput {
				st, obs := underWay()
				st.Nodes["n11"] = NodeStatus{Phase: Waiting, Queued: true} // a longer queue than this budget's
				obs["n1"] = running
				return decideInput{spec: spec, status: st, observed: obs}
			},
			want: Decision{Rollout: runningAt(0, nil), Recorded: true,
				Dequeue: []string{"n9"}, Assign: []string{"n9"}},
		},
		"a queue more than half full is not topped up: the node it lacks is left unqueued, for a later write to queue": {
			in: func() decideInput {
				// A budget of 16: a queue of 4, of which n17..n19 are left.
				st := Status{Nodes: map[string]NodeStatus{}}
				obs := map[string]Observed{}
				for _, n := range fleetOf(16) {
					st.Nodes[n], obs[n] = NodeStatus{Phase: InProgress}, applying
				}
				for _, n := range []string{"n17", "n18", "n19"} {
					st.Nodes[n] = NodeStatus{Phase: Waiting, Queued: true}
				}
				return decideInput{spec: Spec{Nodes: fleetOf(24), MaxUnavailable: intstr.FromInt32(16)}, status: st, observed: obs}
			},
			want:      Decision{Rollout: runningAt(0, nil)},
			wantNodes: map[string]NodeStatus{"n19": {Phase: Waiting, Queued: true}, "n20": {Phase: Waiting}},
		},
		"a queued node that holds another assignment than the one recorded is started afresh, recorded with it in the write before its assignment": {
			in: func() decideInput {
				st, obs := underWay()
				obs["n1"] = running
				obs["n9"] = Observed{Holds: cm("other"), Ready: true, Schedulable: true}
				return decideInput{spec: spec, status: st, observed: obs, nodes: map[string]*corev1.Node{"n9": heldOther}}
			},
			want: Decision{Rollout: runningAt(0, nil), Recorded: true, Write: true,
				Start: []string{"n9"}, Queue: []string{"n11"}, Assign: []string{"n9"}},
			wantNodes: map[string]NodeStatus{"n9": {Phase: InProgress, Previous: cm("other")}},
		},
		"the queue stops at a node to be drained: it is recorded cordoned only when it starts": {
			in: func() decideInput {
				s := spec
				s.Drain = []string{"n10"}
				return decideInput{spec: s}
			},
			want: Decision{Rollout: runningAt(0, nil), Write: true,
				Start: fleetOf(8), Queue: []string{"n9"}, Assign: fleetOf(8)},
			wantNodes: map[string]NodeStatus{"n10": {Phase: Waiting}},
		},
		"a failed node halts before a queued node starts": {
			in: func() decideInput {
				st, obs := underWay()
				obs["n1"], obs["n2"] = running, rolledBack
				return decideInput{spec: spec, status: st, observed: obs}
			},
			want:      Decision{Rollout: halted("node/n2: rolled back"), Recorded: true, Final: true},
			wantNodes: map[string]NodeStatus{"n9": {Phase: Waiting, Queued: true}},
		},
		"a queued node that a client started and that finished before any client recorded it in progress is done, not skipped": {
			in: func() decideInput {
				st, obs := underWay()
				obs["n9"] = running
				return decideInput{spec: spec, status: st, observed: obs}
			},
			want:      Decision{Rollout: runningAt(0, nil), Recorded: true, Write: true, Queue: []string{"n11"}},
			wantNodes: map[string]NodeStatus{"n9": {Phase: Succeeded}},
			started:   []string{"n9"},
		},
		"a queued node a client started that runs its target but is not Ready is in progress, not done": {
			in: func() decideInput {
				st, obs := underWay()
				obs["n9"] = Observed{Assigned: true, Running: true, Schedulable: true}
				return decideInput{spec: spec, status: st, observed: obs}
			},
			want:      Decision{Rollout: runningAt(0, nil), Recorded: true, Write: true, Queue: []string{"n11"}},
			wantNodes: map[string]NodeStatus{"n9": {Phase: InProgress}},
			started:   []string{"n9"},
		},
		"a queued node a client started that failed halts the rollout, and is the rollout's for undo": {
			in: func() decideInput {
				st, obs := underWay()
				obs["n9"] = rolledBack
				return decideInput{spec: spec, status: st, observed: obs}
			},
			want:      Decision{Rollout: halted("node/n9: rolled back"), Recorded: true, Final: true},
			wantNodes: map[string]NodeStatus{"n9": {Phase: Failed, Error: "rolled back"}},
			started:   []string{"n9"},
		},
		"a queued node that left the cluster is skipped, and no longer queued": {
			in: func() decideInput {
				st, obs := underWay()
				return decideInput{spec: spec, status: st, observed: obs, gone: []string{"n10"}}
			},
			want:      Decision{Rollout: runningAt(0, nil), Recorded: true, Write: true, Queue: []string{"n11"}},
			wantNodes: map[string]NodeStatus{"n10": {Phase: Skipped, Error: "node not found"}},
		},
		"a queued node this client assigned is in progress, and takes its slot, before its Node shows it": {
			in: func() decideInput {
				st, obs := underWay()
				obs["n1"] = running
				return decideInput{spec: spec, status: st, observed: obs, assigned: map[string]bool{"n9": true}}
			},
			want:      Decision{Rollout: runningAt(0, nil), Recorded: true, Write: true, Queue: []string{"n11"}},
			wantNodes: map[string]NodeStatus{"n9": {Phase: InProgress}, "n10": {Phase: Waiting, Queued: true}},
			started:   []string{"n9"},
		},
		"where the cluster cannot store a queue, nodes start after a write, and none is queued": {
			in: func() decideInput {
				st, obs := underWay()
				delete(st.Nodes, "n9") // the apiserver dropped the queue
				delete(st.Nodes, "n10")
				obs["n1"] = running
				return decideInput{spec: spec, status: st, observed: obs, unqueued: true}
			},
			want: Decision{Rollout: runningAt(0, nil), Recorded: true, Write: true,
				Start: []string{"n9"}, Assign: []string{"n9"}},
			wantNodes: map[string]NodeStatus{"n11": {Phase: Waiting}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := tc.in().decide(t)
			if diff := cmp.Diff(tc.want, d, statusOf); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			for n, want := range tc.wantNodes {
				if diff := cmp.Diff(want, d.Rollout.NodeStatus(n), cmpopts.IgnoreFields(NodeStatus{}, "Started", "Finished")); diff != "" {
					t.Errorf("node %s (-want +got):\n%s", n, diff)
				}
			}
			for _, n := range append(d.Dequeue, tc.started...) {
				if rec := d.Rollout.NodeStatus(n); rec.Started == nil {
					t.Errorf("node %s, started from the queue, has no start time: undo would leave it alone", n)
				}
			}
		})
	}
}
