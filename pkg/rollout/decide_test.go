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
	"k8s.io/apimachinery/pkg/types"
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

// r1UID is the UID of the rollout r1 of the tests.
const r1UID types.UID = "uid-r1"

// startedAt is when r1's marks say it started a node.
var startedAt = metav1.NewMicroTime(t0.Add(-time.Minute))

// markOf is the mark r1 writes on a node it starts that held prev, cordoned
// when it drains the node.
func markOf(prev *corev1.NodeConfigSource, cordoned bool) *Mark {
	return &Mark{Rollout: source.DefaultNamespace + "/r1", UID: r1UID, Previous: prev, Cordoned: cordoned, Started: startedAt}
}

// ours is o on a node that r1 started, holding no assignment before.
func ours(o Observed) Observed {
	o.Mark = markOf(nil, false)
	return o
}

// oursWith is o on a node that r1 started with mark m.
func oursWith(o Observed, m *Mark) Observed {
	o.Mark = m
	return o
}

// statusOf compares a Decision's Rollout by the rollout's own status:
// each node's record is checked apart.
var statusOf = cmp.Transformer("status", func(r *Rollout) Status {
	return Status{State: r.Status.State, Reason: r.Status.Reason, Wave: r.Status.Wave, SoakSince: r.Status.SoakSince, Failures: r.Status.Failures}
})

// runningAt is a Running rollout in wave, soaking since soak (nil: not).
func runningAt(wave int, soak *metav1.Time) *Rollout {
	return &Rollout{Status: Status{State: Running, Wave: wave, SoakSince: soak}}
}

// runningWhy is a rollout running in wave 0 that says why no node starts.
func runningWhy(reason string) *Rollout {
	return &Rollout{Status: Status{State: Running, Reason: reason}}
}

// halted is a rollout halted in wave 0 by the failures, the first of
// which is the reason.
func halted(failures ...Failure) *Rollout {
	return &Rollout{Status: Status{State: Halted, Reason: haltReason(failures[0].Node, failures[0].Error), Failures: failures}}
}

// fleetOf names n nodes n1...nN.
func fleetOf(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i+1)
	}
	return names
}

// decideInput is a pass's view of rollout r1, valid by default: a Running
// rollout over five idle nodes with no canary and a budget of one. Each
// node's part in it is its mark (Observed.Mark); status.nodes may give
// records, as a rollout whose status a pass derived already.
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
	now      time.Time
	// alerts is what the driver learnt of spec.pauseOnAlerts.
	alerts Alerts
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
	r.UID = r1UID
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
	before := r.DeepCopy()
	d, err := decide(r, observed, nodes, in.assigned, now, in.alerts)
	if err != nil {
		t.Fatalf("decide: %v", err)
	}
	if diff := cmp.Diff(before, r); diff != "" {
		t.Errorf("decide changed the rollout it was given (-before +after):\n%s", diff)
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
	heldOld, err := source.PatchedNode(readyNode("n1", nil), mustAssignPatch(t, cm("old")))
	if err != nil {
		t.Fatal(err)
	}
	// twelve failed nodes, more than Status.Failures lists.
	twelveFailed := map[string]Observed{}
	var firstTen []Failure
	for i, n := range fleetOf(12) {
		twelveFailed[n] = ours(rolledBack)
		if i < MaxFailures {
			firstTen = append(firstTen, Failure{Node: n, Error: "rolled back"})
		}
	}

	tests := map[string]struct {
		in   decideInput
		want Decision
		// wantNodes holds the records expected of some nodes, times aside.
		wantNodes map[string]NodeStatus
	}{
		"the canary starts first, alone, marked in the patch that assigns it, with no write of the rollout": {
			in:        decideInput{spec: oneCanaryBudget2},
			want:      Decision{Rollout: runningAt(0, nil), Start: []string{"n1"}, Assign: []string{"n1"}},
			wantNodes: map[string]NodeStatus{"n1": {Phase: InProgress, Marked: true}, "n2": {Phase: Waiting}},
		},
		"no node after the canary starts before the canary is done, whatever the budget": {
			in: decideInput{spec: oneCanaryBudget2,
				observed: map[string]Observed{"n1": ours(applying)}},
			want:      Decision{Rollout: runningAt(0, nil)},
			wantNodes: map[string]NodeStatus{"n1": {Phase: InProgress, Marked: true}},
		},
		"a failed node halts before any node starts": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(3)},
				observed: map[string]Observed{"n1": ours(rolledBack)}},
			want:      Decision{Rollout: halted(Failure{Node: "n1", Error: "rolled back"}), Final: true},
			wantNodes: map[string]NodeStatus{"n1": {Phase: Failed, Error: "rolled back", Marked: true}, "n2": {Phase: Waiting}},
		},
		"the failures listed are the first MaxFailures nodes in rollout order": {
			in: decideInput{spec: Spec{Nodes: fleetOf(12), MaxUnavailable: intstr.FromInt32(12)},
				observed: twelveFailed},
			want: Decision{Rollout: halted(firstTen...), Final: true},
		},
		"a node assigned the target by hand that fails halts the rollout too": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(3)},
				observed: map[string]Observed{"n4": rolledBack}},
			want:      Decision{Rollout: halted(Failure{Node: "n4", Error: "rolled back"}), Final: true},
			wantNodes: map[string]NodeStatus{"n4": {Phase: Failed, Error: "rolled back"}},
		},
		"a failed node halts before a drained node that passed its gate is uncordoned": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(2), Drain: []string{"n1"}},
				observed: map[string]Observed{"n1": oursWith(Observed{Assigned: true, Running: true, Ready: true}, markOf(nil, true)), "n2": ours(rolledBack)}},
			want:      Decision{Rollout: halted(Failure{Node: "n2", Error: "rolled back"}), Final: true},
			wantNodes: map[string]NodeStatus{"n1": {Phase: InProgress, Cordoned: true, Marked: true}},
		},
		"a node assigned by hand outside the rollout while in progress halts it": {
			in: decideInput{
				observed: map[string]Observed{"n1": ours(Observed{Holds: cm("other"), Ready: true, Schedulable: true})}},
			want: Decision{Rollout: halted(Failure{Node: "n1", Error: changedOutside(cm("other"), nil)}), Final: true},
		},
		"a drained node that passed its gate is uncordoned, and holds its slot until its mark says so": {
			in: decideInput{spec: Spec{Canary: 1, MaxUnavailable: intstr.FromInt32(1), Drain: []string{"n1"}},
				observed: map[string]Observed{"n1": oursWith(Observed{Assigned: true, Running: true, Ready: true}, markOf(nil, true))}},
			want:      Decision{Rollout: runningAt(0, nil), Uncordon: []string{"n1"}},
			wantNodes: map[string]NodeStatus{"n1": {Phase: InProgress, Cordoned: true, Marked: true}, "n2": {Phase: Waiting}},
		},
		"a drained node that is not Ready yet is not uncordoned": {
			in: decideInput{spec: Spec{Drain: []string{"n1"}},
				observed: map[string]Observed{"n1": oursWith(Observed{Assigned: true, Running: true}, markOf(nil, true))}},
			want: Decision{Rollout: runningAt(0, nil)},
		},
		"the rollout is not done while a drained node is cordoned": {
			in: decideInput{spec: Spec{Nodes: fleetOf(2), Drain: []string{"n2"}},
				observed: map[string]Observed{"n1": ours(running), "n2": oursWith(Observed{Assigned: true, Running: true, Ready: true}, markOf(nil, true))}},
			want: Decision{Rollout: runningAt(0, nil), Uncordon: []string{"n2"}},
		},
		"the rollout is done once every node is done and uncordoned": {
			in: decideInput{spec: Spec{Nodes: fleetOf(2), Drain: []string{"n2"}},
				observed: map[string]Observed{"n1": ours(running), "n2": ours(running)}},
			want:      Decision{Rollout: &Rollout{Status: Status{State: Done}}, Final: true},
			wantNodes: map[string]NodeStatus{"n1": {Phase: Succeeded, Marked: true}, "n2": {Phase: Succeeded, Marked: true}},
		},
		"nodes that already run the target are skipped and take no slot": {
			in: decideInput{spec: Spec{Nodes: fleetOf(3), Canary: 1},
				observed: map[string]Observed{"n1": running, "n2": running}},
			want:      Decision{Rollout: runningAt(1, nil), Write: true, Start: []string{"n3"}, Assign: []string{"n3"}},
			wantNodes: map[string]NodeStatus{"n1": {Phase: Skipped}, "n2": {Phase: Skipped}},
		},
		"a node that left the cluster is skipped": {
			in:        decideInput{spec: Spec{Nodes: fleetOf(2), Canary: 1}, gone: []string{"n1"}},
			want:      Decision{Rollout: runningAt(1, nil), Write: true, Start: []string{"n2"}, Assign: []string{"n2"}},
			wantNodes: map[string]NodeStatus{"n1": {Phase: Skipped, Error: "node not found"}},
		},
		"the budget bounds the nodes started at once, taken in rollout order": {
			in:   decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(2)}},
			want: Decision{Rollout: runningAt(0, nil), Start: []string{"n1", "n2"}, Assign: []string{"n1", "n2"}},
		},
		"nodes marked and not done count against the budget, wherever they are in the order": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(3)},
				observed: map[string]Observed{"n4": ours(applying), "n5": ours(applying)}},
			want: Decision{Rollout: runningAt(0, nil), Start: []string{"n1"}, Assign: []string{"n1"}},
		},
		"nodes marked and done take no slot": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(2)},
				observed: map[string]Observed{"n1": ours(running), "n2": ours(running)}},
			want: Decision{Rollout: runningAt(0, nil), Start: []string{"n3", "n4"}, Assign: []string{"n3", "n4"}},
		},
		"a node done that goes NotReady takes a slot again": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(2)},
				observed: map[string]Observed{"n1": ours(Observed{Assigned: true, Running: true, Schedulable: true})}},
			want:      Decision{Rollout: runningAt(0, nil), Start: []string{"n2"}, Assign: []string{"n2"}},
			wantNodes: map[string]NodeStatus{"n1": {Phase: InProgress, Marked: true}},
		},
		"a node done that is assigned something else by hand while the rollout runs halts it": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(2)},
				observed: map[string]Observed{"n1": ours(Observed{Holds: cm("other"), Ready: true, Schedulable: true}), "n2": ours(running)}},
			want: Decision{Rollout: halted(Failure{Node: "n1", Error: changedOutside(cm("other"), nil)}), Final: true},
		},
		"NotReady nodes the rollout did not start count against the budget": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(2)},
				observed: map[string]Observed{"n4": notReady}},
			want: Decision{Rollout: runningAt(0, nil), Start: []string{"n1"}, Assign: []string{"n1"}},
		},
		"cordoned nodes count against the budget; with nothing in progress, the reason names them": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(2)},
				observed: map[string]Observed{"n2": unschedulable, "n5": unschedulable}},
			want: Decision{Rollout: runningWhy("BudgetHeld: no node starts while node/n2 (cordoned), node/n5 (cordoned) are unavailable, which the budget of 2 counts: uncordon them or make them Ready, or start the rollout again with a larger budget"), Write: true},
		},
		"a NotReady node fills a budget in percent; the reason says so once": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromString("20%")},
				status:   Status{Reason: "BudgetHeld: no node starts while node/n3 (NotReady) is unavailable, which the budget of 1 (20%) counts: uncordon it or make it Ready, or start the rollout again with a larger budget"},
				observed: map[string]Observed{"n3": notReady}},
			want: Decision{Rollout: runningWhy("BudgetHeld: no node starts while node/n3 (NotReady) is unavailable, which the budget of 1 (20%) counts: uncordon it or make it Ready, or start the rollout again with a larger budget")},
		},
		"the budget's reason clears once the nodes are back": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(2)},
				status: Status{Reason: "BudgetHeld: no node starts while node/n2 (cordoned), node/n5 (cordoned) are unavailable, which the budget of 2 counts: uncordon them or make them Ready, or start the rollout again with a larger budget"}},
			want: Decision{Rollout: runningAt(0, nil), Write: true, Start: []string{"n1", "n2"}, Assign: []string{"n1", "n2"}},
		},
		"nodes the rollout did not start that fill the budget beside one of its own in progress: no reason": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(2)},
				observed: map[string]Observed{"n1": ours(applying), "n4": unschedulable}},
			want:      Decision{Rollout: runningAt(0, nil)},
			wantNodes: map[string]NodeStatus{"n1": {Phase: InProgress, Marked: true}},
		},
		"a NotReady node of the wave takes its own slot when it starts, and no other": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(2)},
				observed: map[string]Observed{"n1": notReady}},
			want: Decision{Rollout: runningAt(0, nil), Start: []string{"n1", "n2"}, Assign: []string{"n1", "n2"}},
		},
		"a node assigned the target by hand before its turn holds a slot, and is not marked": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(2)},
				observed: map[string]Observed{"n3": applying}},
			want:      Decision{Rollout: runningAt(0, nil), Start: []string{"n1"}, Assign: []string{"n1"}},
			wantNodes: map[string]NodeStatus{"n3": {Phase: InProgress}},
		},
		"a node a dead driver marked and did not assign is assigned, and holds its slot": {
			in: decideInput{
				observed: map[string]Observed{"n2": ours(idle)}},
			want:      Decision{Rollout: runningAt(0, nil), Assign: []string{"n2"}},
			wantNodes: map[string]NodeStatus{"n1": {Phase: Waiting}, "n2": {Phase: InProgress, Marked: true}},
		},
		"a node a dead driver marked, still on its previous assignment, is assigned": {
			in: decideInput{
				observed: map[string]Observed{"n1": oursWith(Observed{Holds: cm("old"), Ready: true, Schedulable: true}, markOf(cm("old"), false))}},
			want:      Decision{Rollout: runningAt(0, nil), Assign: []string{"n1"}},
			wantNodes: map[string]NodeStatus{"n1": {Phase: InProgress, Previous: cm("old"), Marked: true}},
		},
		"a node this driver assigned is not assigned again while its Node does not show it yet": {
			in: decideInput{
				observed: map[string]Observed{"n1": ours(idle)},
				assigned: map[string]bool{"n1": true}},
			want: Decision{Rollout: runningAt(0, nil)},
		},
		"a node is marked with the assignment it held, to undo to, and cordoned when it is drained": {
			in: decideInput{spec: Spec{Drain: []string{"n1"}}, nodes: map[string]*corev1.Node{"n1": heldOld},
				observed: map[string]Observed{"n1": {Holds: cm("old"), Ready: true, Schedulable: true}}},
			want:      Decision{Rollout: runningAt(0, nil), Start: []string{"n1"}, Assign: []string{"n1"}},
			wantNodes: map[string]NodeStatus{"n1": {Phase: InProgress, Previous: cm("old"), Cordoned: true, Marked: true}},
		},
		"a mark of another rollout, or of an earlier rollout of the same name, does not start the node": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(2)},
				observed: map[string]Observed{
					"n1": oursWith(idle, &Mark{Rollout: "kube-system/other", UID: "uid-other"}),
					"n2": oursWith(idle, &Mark{Rollout: "kube-system/r1", UID: "uid-of-an-earlier-r1"}),
				}},
			want:      Decision{Rollout: runningAt(0, nil), Start: []string{"n1", "n2"}, Assign: []string{"n1", "n2"}},
			wantNodes: map[string]NodeStatus{"n1": {Phase: InProgress, Marked: true}, "n2": {Phase: InProgress, Marked: true}},
		},
		"with no soak, a slot freed by a finished node goes at once to the next node, without waiting for the rest of its wave": {
			in: decideInput{spec: oneCanaryBudget2,
				status:   Status{Wave: 1},
				observed: map[string]Observed{"n1": ours(running), "n2": ours(running), "n3": ours(applying)}},
			want:      Decision{Rollout: runningAt(1, nil), Start: []string{"n4"}, Assign: []string{"n4"}},
			wantNodes: map[string]NodeStatus{"n2": {Phase: Succeeded, Marked: true}, "n3": {Phase: InProgress, Marked: true}, "n4": {Phase: InProgress, Marked: true}, "n5": {Phase: Waiting}},
		},
		"with no soak and no canary, the budget alone bounds the nodes under way": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(3)},
				observed: map[string]Observed{"n1": ours(running), "n2": ours(applying)}},
			want: Decision{Rollout: runningAt(0, nil), Start: []string{"n3", "n4"}, Assign: []string{"n3", "n4"}},
		},
		"the wave after the canary is written when the rollout enters it": {
			in: decideInput{spec: oneCanaryBudget2,
				observed: map[string]Observed{"n1": ours(running)}},
			want: Decision{Rollout: runningAt(1, nil), Write: true, Start: []string{"n2", "n3"}, Assign: []string{"n2", "n3"}},
		},
		"records a pass derived already are kept: a node recorded in progress is not started again": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(2)},
				status: Status{Nodes: map[string]NodeStatus{"n1": {Phase: InProgress, Marked: true}}}},
			want: Decision{Rollout: runningAt(0, nil), Start: []string{"n2"}, Assign: []string{"n1", "n2"}},
		},
		"with a soak, the next wave waits for every node of the wave before": {
			in: decideInput{spec: withSoak,
				status:   Status{Wave: 1},
				observed: map[string]Observed{"n1": ours(running), "n2": ours(running), "n3": ours(applying)}},
			want: Decision{Rollout: runningAt(1, nil)},
		},
		"a soak begins when every node before the next wave is done and healthy": {
			in: decideInput{spec: withSoak,
				observed: map[string]Observed{"n1": ours(running)}},
			want: Decision{Rollout: runningAt(0, &metav1.Time{Time: t0}), Write: true, Wake: t0.Add(time.Minute)},
		},
		"a wave starts only after the soak since the previous wave was last all healthy": {
			in: decideInput{spec: withSoak, status: Status{SoakSince: soakSince(59 * time.Second)},
				observed: map[string]Observed{"n1": ours(running)}},
			want: Decision{Rollout: runningAt(0, soakSince(59*time.Second)), Wake: t0.Add(time.Second)},
		},
		"a wave starts once the soak has passed": {
			in: decideInput{spec: withSoak, status: Status{SoakSince: soakSince(time.Minute)},
				observed: map[string]Observed{"n1": ours(running)}},
			want: Decision{Rollout: runningAt(1, nil), Write: true, Start: []string{"n2", "n3"}, Assign: []string{"n2", "n3"}},
		},
		"a node of an earlier wave turning NotReady breaks the soak": {
			in: decideInput{spec: withSoak, status: Status{SoakSince: soakSince(30 * time.Second)},
				observed: map[string]Observed{"n1": ours(Observed{Assigned: true, Running: true, Schedulable: true})}},
			want: Decision{Rollout: runningAt(0, nil), Write: true},
		},
		"a skipped node of an earlier wave turning NotReady breaks the soak": {
			in: decideInput{spec: withSoak, status: Status{SoakSince: soakSince(30 * time.Second)},
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
			for _, n := range d.Start {
				if rec := d.Rollout.NodeStatus(n); !rec.Marked || rec.Started == nil {
					t.Errorf("node %s started with %+v: want it marked, with its start time, for undo", n, rec)
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
// clock: a node started with the pass's time, a soak with its beginning; a
// node's start is then its mark's, and its end the pass that saw it done.
func TestDecideStampsTimes(t *testing.T) {
	clock := testingclock.NewFakeClock(t0)
	in := decideInput{spec: Spec{Nodes: fleetOf(2), Canary: 1, Soak: metav1.Duration{Duration: time.Minute}}}
	in.now = clock.Now()
	d := in.decide(t)
	if got := d.Rollout.NodeStatus("n1").Started; got == nil || !got.Time.Equal(t0) {
		t.Errorf("n1 started %v, want %v", got, t0)
	}

	clock.Step(10 * time.Second)
	mark := markOf(nil, false)
	mark.Started = metav1.NewMicroTime(t0)
	in.observed, in.now = map[string]Observed{"n1": oursWith(running, mark)}, clock.Now()
	d = in.decide(t)
	rec := d.Rollout.NodeStatus("n1")
	if rec.Started == nil || !rec.Started.Time.Equal(t0) {
		t.Errorf("n1 started %v, want its mark's %v", rec.Started, t0)
	}
	if rec.Finished == nil || !rec.Finished.Time.Equal(t0.Add(10*time.Second)) {
		t.Errorf("n1 finished %v, want %v", rec.Finished, t0.Add(10*time.Second))
	}
	if got, want := d.Wake, clock.Now().Add(time.Minute); !got.Equal(want) {
		t.Errorf("wake %v, want the soak's end %v", got, want)
	}
}

// TestDecideRecordsPreviousPin: a node started is marked with the pin of
// the assignment it held, which undo gives back.
func TestDecideRecordsPreviousPin(t *testing.T) {
	pin := source.NewPin(cm("old"), []byte("old bytes"), []string{"scheduling"})
	patch, err := source.AssignPatch(source.Annotation, cm("old"), pin)
	if err != nil {
		t.Fatal(err)
	}
	held, err := source.PatchedNode(readyNode("n1", nil), patch)
	if err != nil {
		t.Fatal(err)
	}
	d := decideInput{nodes: map[string]*corev1.Node{"n1": held},
		observed: map[string]Observed{"n1": {Holds: cm("old"), Ready: true, Schedulable: true}}}.decide(t)
	want := NodeStatus{Phase: InProgress, Previous: cm("old"), PreviousPin: pin, Marked: true}
	if diff := cmp.Diff(want, d.Rollout.NodeStatus("n1"), cmpopts.IgnoreFields(NodeStatus{}, "Started", "Finished")); diff != "" {
		t.Errorf("n1 (-want +got):\n%s", diff)
	}
}
