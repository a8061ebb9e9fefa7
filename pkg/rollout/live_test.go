package rollout

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
)

// TestLiveStatus: the phases come from the nodes listed now, a node the
// list lacks is skipped, the State is filled in, and r is left as it was.
func TestLiveStatus(t *testing.T) {
	r := New("kube-system", "r1", Spec{Config: cm("a"), Nodes: []string{"n1", "n2"}, MaxUnavailable: intstr.FromInt32(1)})
	got, err := LiveStatus(context.Background(), fake.NewClientset(readyNode("n1", nil)), r)
	if err != nil {
		t.Fatal(err)
	}
	phases := map[string]Phase{}
	for _, n := range got.Spec.Nodes {
		phases[n] = got.NodeStatus(n).Phase
	}
	if diff := cmp.Diff(map[string]Phase{"n1": Waiting, "n2": Skipped}, phases); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
	if e := got.NodeStatus("n2").Error; e != "node not found" {
		t.Errorf("n2's error = %q, want %q", e, "node not found")
	}
	if got.Status.State != got.State() || got.Status.State == "" {
		t.Errorf("Status.State = %q, want %q", got.Status.State, got.State())
	}
	if len(r.Status.Nodes) != 0 {
		t.Errorf("LiveStatus changed its argument: %v", r.Status.Nodes)
	}
}
