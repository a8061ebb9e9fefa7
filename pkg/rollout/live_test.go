package rollout

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
)

// TestLiveStatus: the phases come from the nodes listed now and their
// marks: a node marked by the rollout is its own, in progress until it
// runs its target; a node marked by another rollout is waiting; a node
// the list lacks is skipped. The State is filled in, and r is left as it
// was.
func TestLiveStatus(t *testing.T) {
	r := New("kube-system", "r1", Spec{Config: cm("a"), Nodes: []string{"n1", "n2", "n3", "n4", "n5"}, MaxUnavailable: intstr.FromInt32(1)})
	r.UID = r1UID
	mine := withMark(t, readyNode("n3", nil), markOf(nil, false))
	other := withMark(t, readyNode("n4", nil), &Mark{Rollout: "kube-system/other", UID: "uid-other", Previous: cm("old")})
	done := withMark(t, runningOn(t, readyNode("n5", nil), cm("a")), markOf(cm("old"), false))
	got, err := LiveStatus(context.Background(), fake.NewClientset(readyNode("n1", nil), mine, other, done), r)
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]NodeStatus{}
	for _, n := range got.Spec.Nodes {
		nodes[n] = got.NodeStatus(n)
	}
	want := map[string]NodeStatus{
		"n1": {Phase: Waiting},
		"n2": {Phase: Skipped, Error: "node not found"},
		"n3": {Phase: InProgress, Marked: true},
		"n4": {Phase: Waiting},
		"n5": {Phase: Succeeded, Previous: cm("old"), Marked: true},
	}
	if diff := cmp.Diff(want, nodes, cmpopts.IgnoreFields(NodeStatus{}, "Started", "Finished")); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if got.Status.State != got.State() || got.Status.State == "" {
		t.Errorf("Status.State = %q, want %q", got.Status.State, got.State())
	}
	if len(r.Status.Nodes) != 0 {
		t.Errorf("LiveStatus changed its argument: %v", r.Status.Nodes)
	}
}
