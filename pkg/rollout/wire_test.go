package rollout

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// Every write of a rollout must fit etcd's default request limit, 1.5 MiB,
// managed fields included (TestNodeConfigRolloutAPI writes one on a real
// apiserver). The undo of a rollout over 5000 nodes (the Kubernetes
// scalability limit) that all held an assignment before sends each node
// back to its own, and encodes in under 1 MiB.
func TestUndoOver5000NodesFitsEtcd(t *testing.T) {
	now := metav1.NowMicro()
	pin := source.NewPin(cm("kubelet-config-pool-a-7f9c2"), []byte("old bytes"), nil)
	var names []string
	for i := range 5000 {
		names = append(names, fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", i/256, i%256))
	}
	r := New("kube-system", "fleet", Spec{Config: cm("kubelet-config-pool-a-8b1d3"), Nodes: names, MaxUnavailable: intstr.FromString("10%")})
	r.Status.Nodes = map[string]NodeStatus{}
	for _, n := range names {
		r.Status.Nodes[n] = NodeStatus{Phase: Succeeded, Previous: cm("kubelet-config-pool-a-7f9c2"), PreviousPin: pin, Marked: true, Started: &now, Finished: &now}
	}
	undo, _, err := Plan(Request{Namespace: "kube-system", Name: "undo", UndoOf: r}, Facts{})
	if err != nil {
		t.Fatal(err)
	}
	if len(undo.Spec.Nodes) != len(names) {
		t.Fatalf("the undo covers %d nodes, want %d", len(undo.Spec.Nodes), len(names))
	}
	data, err := json.Marshal(undo)
	if err != nil {
		t.Fatal(err)
	}
	if limit := 1 << 20; len(data) > limit {
		t.Errorf("the undo encodes in %d bytes (%d per node), over %d", len(data), len(data)/5000, limit)
	}
	t.Logf("the undo: %d bytes, %d per node", len(data), len(data)/5000)
}

// An undo's per-node targets and pins are stored as groups, each target
// once with its nodes, and read back as they were written.
func TestTargetsStoredForm(t *testing.T) {
	oldPin := source.NewPin(cm("old"), []byte("old bytes"), nil)
	in := Spec{
		Nodes:          []string{"n1", "n2", "n3", "n4"},
		MaxUnavailable: intstr.FromInt32(1),
		Targets:        Targets{"n1": cm("old"), "n2": nil, "n3": cm("old"), "n4": cm("older")},
		TargetPins:     TargetPins{"n1": oldPin, "n3": oldPin},
	}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var stored struct {
		Targets []struct {
			Nodes []string `json:"nodes"`
		} `json:"targets"`
		TargetPins []struct {
			Nodes []string `json:"nodes"`
		} `json:"targetPins"`
	}
	if err := json.Unmarshal(data, &stored); err != nil {
		t.Fatal(err)
	}
	if len(stored.Targets) != 3 || len(stored.TargetPins) != 1 || !slices.Equal(stored.TargetPins[0].Nodes, []string{"n1", "n3"}) {
		t.Errorf("stored as %s; want three groups of targets (old: n1 n3; local: n2; older: n4) and one of pins (n1 n3)", data)
	}
	var out Spec
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(in, out); d != "" {
		t.Errorf("spec read back differs (-written +read):\n%s", d)
	}
	if tgt, ok := out.Targets["n2"]; !ok || tgt != nil {
		t.Errorf("n2's target read back as %v, %v; want its local config (nil, listed)", tgt, ok)
	}

	var bad Spec
	err = json.Unmarshal([]byte(`{"nodes":["n1"],"maxUnavailable":1,"targets":[{"config":null,"nodes":["n1"]},{"config":null,"nodes":["n1"]}]}`), &bad)
	if err == nil || !strings.Contains(err.Error(), `node "n1" is in two groups of configs`) {
		t.Errorf("err = %v, want the node in two groups named", err)
	}
}
