package rollout

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

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

// TestObservationsAcrossGoroutines: the workers of a pass that starts
// nodes observe the nodes in progress at once (interrupted), each through
// the one cache. Run with -race.
func TestObservationsAcrossGoroutines(t *testing.T) {
	var c observations
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 50 {
				n := readyNode(fmt.Sprintf("n%d", i%10), nil)
				n.ResourceVersion = strconv.Itoa(w*100 + i)
				if _, err := c.observe(n, cm("new"), nil); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if len(c.byNode) != 10 {
		t.Errorf("%d nodes cached, want 10", len(c.byNode))
	}
}

// TestObserveReadsTheMark: Observe returns the node's mark, whichever
// rollout wrote it; a mark that does not decode is an error.
func TestObserveReadsTheMark(t *testing.T) {
	marked := func(value string) *corev1.Node {
		n := readyNode("n1", nil)
		n.Annotations = map[string]string{MarkAnnotation: value}
		return n
	}
	tests := map[string]struct {
		node    *corev1.Node
		want    Observed
		wantErr bool
	}{
		"no mark": {node: readyNode("n1", nil), want: Observed{Ready: true, Schedulable: true}},
		"a mark": {
			node: marked(`{"rollout":"kube-system/r1","uid":"uid-r1","started":"2026-11-23T05:19:00.000000Z"}`),
			want: Observed{Ready: true, Schedulable: true, Mark: markOf(nil, false)},
		},
		"a mark that does not decode": {node: marked("not json"), wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Observe(tc.node, cm("new"), nil)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want an error: %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestRecordPhases: each node's record is derived from its mark: a node
// whose mark names the rollout (by UID) is one it started, with the
// assignment it held and whether it is cordoned; any other node is
// Waiting, Skipped when it already runs the target or left the cluster.
func TestRecordPhases(t *testing.T) {
	r := New(source.DefaultNamespace, "r1", Spec{Config: cm("new"), Nodes: fleetOf(6), MaxUnavailable: intstr.FromInt32(1)})
	r.UID = r1UID
	observed := map[string]Observed{
		"n1": ours(running),
		"n2": oursWith(applying, markOf(cm("old"), true)),
		"n3": idle,
		"n4": oursWith(applying, &Mark{Rollout: "kube-system/r1", UID: "uid-earlier"}),
		"n5": running,
		// n6 left the cluster.
	}
	got, changed := recordPhases(r, observed, metav1.NewMicroTime(t0))
	if !changed {
		t.Error("changed = false, want true")
	}
	want := map[string]NodeStatus{
		"n1": {Phase: Succeeded, Marked: true},
		"n2": {Phase: InProgress, Previous: cm("old"), Cordoned: true, Marked: true},
		"n3": {Phase: Waiting},
		"n4": {Phase: InProgress},
		"n5": {Phase: Skipped},
		"n6": {Phase: Skipped, Error: "node not found"},
	}
	gotNodes := map[string]NodeStatus{}
	for _, n := range r.Spec.Nodes {
		gotNodes[n] = got.NodeStatus(n)
	}
	if diff := cmp.Diff(want, gotNodes, cmpopts.IgnoreFields(NodeStatus{}, "Started", "Finished")); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if s := got.NodeStatus("n2").Started; s == nil || !s.Time.Equal(startedAt.Time) {
		t.Errorf("n2 started %v, want its mark's %v", s, startedAt)
	}
	if r.Status.Nodes != nil {
		t.Errorf("recordPhases changed its argument: %v", r.Status.Nodes)
	}
	if diff := cmp.Diff(Counts{Waiting: 1, InProgress: 2, Updated: 1, Skipped: 2}, Count(got)); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}

	// Nothing to record: nothing changed.
	if _, changed := recordPhases(r, map[string]Observed{"n1": idle, "n2": idle, "n3": idle, "n4": idle, "n5": idle, "n6": idle}, metav1.NewMicroTime(t0)); changed {
		t.Error("idle nodes the rollout did not start: changed = true, want false")
	}
}

// TestEngineObservesTheMarksItWrote: the node cache may not show a mark
// this driver wrote yet; the engine's observation carries it meanwhile, so
// the node counts against the budget from the moment it is marked. A mark
// of the rollout the cache shows wins.
func TestEngineObservesTheMarksItWrote(t *testing.T) {
	r := New(source.DefaultNamespace, "r1", Spec{Config: cm("new"), Nodes: fleetOf(2), MaxUnavailable: intstr.FromInt32(1)})
	r.UID = r1UID
	written := markOf(nil, false)
	shown := markOf(cm("old"), true)
	tests := map[string]struct {
		node *corev1.Node
		want *Mark
	}{
		"the cache shows no mark":                {node: readyNode("n1", nil), want: written},
		"the cache shows another rollout's mark": {node: withMark(t, readyNode("n1", nil), &Mark{Rollout: "kube-system/other", UID: "uid-other"}), want: written},
		"the cache shows the rollout's mark":     {node: withMark(t, readyNode("n1", nil), shown), want: shown},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := &engine{cur: r, marks: map[string]*Mark{"n1": written}}
			o, err := e.observe(tc.node, cm("new"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, o.Mark); diff != "" {
				t.Errorf("mark (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSlimNode: the node cache keeps what the drivers read (labels,
// annotations, taints, cordon, conditions, addresses, the kubelet's
// version) and drops what they do not.
func TestSlimNode(t *testing.T) {
	node := readyNode("n1", map[string]string{"pool": "a"})
	node.Annotations = map[string]string{MarkAnnotation: "{}"}
	node.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	node.Spec = corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}
	node.Status.NodeInfo.KubeletVersion = "v1.34.12"
	want := node.DeepCopy()
	want.ManagedFields = nil
	node.Status.Images = []corev1.ContainerImage{{Names: []string{"registry.k8s.io/pause:3.10"}, SizeBytes: 1}}
	node.Status.VolumesInUse = []corev1.UniqueVolumeName{"v"}
	node.Status.VolumesAttached = []corev1.AttachedVolume{{Name: "v"}}
	got, err := SlimNode(node)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("slim node (-want +got):\n%s", diff)
	}
}
