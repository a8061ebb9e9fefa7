package rollout

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// A rollout's status lists each previous assignment once, and reads back
// as it was written.
func TestStatusStoredForm(t *testing.T) {
	now := metav1.NewMicroTime(time.Date(2026, 11, 26, 18, 0, 0, 123456000, time.UTC))
	oldPin := source.NewPin(cm("old"), []byte("old bytes"), []string{"scheduling"})
	in := Status{
		State: Running,
		Wave:  1,
		Nodes: map[string]NodeStatus{
			"n1": {Phase: Succeeded, Previous: cm("old"), PreviousPin: oldPin, Started: &now, Finished: &now},
			"n2": {Phase: InProgress, Previous: cm("old"), PreviousPin: oldPin, Started: &now, Cordoned: true},
			"n3": {Phase: Failed, Error: "rolled back", Started: &now}, // on its local config before
			"n4": {Phase: InProgress, Previous: cm("older"), Started: &now},
			"n5": {Phase: InProgress, Previous: cm("old"), Started: &now}, // the same config, no pin
			"n6": {Phase: Waiting, Queued: true, Previous: cm("old"), PreviousPin: oldPin},
		},
	}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var stored map[string]any
	if err := json.Unmarshal(data, &stored); err != nil {
		t.Fatal(err)
	}
	if got := len(stored["previous"].([]any)); got != 3 {
		t.Errorf("status.previous has %d entries, want 3 (old with its pin, older, old without a pin):\n%s", got, data)
	}
	nodes := stored["nodes"].(map[string]any)
	if nodes["n1"].(map[string]any)["previous"] != nodes["n2"].(map[string]any)["previous"] {
		t.Errorf("n1 and n2 held the same assignment but name different entries:\n%s", data)
	}
	if _, ok := nodes["n3"].(map[string]any)["previous"]; ok {
		t.Errorf("n3 ran its local config, but its status names a previous assignment:\n%s", data)
	}
	var out Status
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(in, out); d != "" {
		t.Errorf("status read back differs (-written +read):\n%s", d)
	}
	again, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(data) {
		t.Errorf("the same status encodes differently:\n%s\n%s", data, again)
	}
}

func TestStatusStoredFormRefusesAMissingEntry(t *testing.T) {
	var s Status
	err := json.Unmarshal([]byte(`{"wave":0,"lastUpdate":null,"previous":[{"config":{"configMap":{"namespace":"kube-system","name":"a","kubeletConfigKey":"kubelet"}}}],"nodes":{"n1":{"phase":"Done","previous":1}}}`), &s)
	if err == nil || !strings.Contains(err.Error(), `status.nodes["n1"].previous is 1, but status.previous has 1 entries`) {
		t.Errorf("err = %v, want the node and its missing entry named", err)
	}
}

// Every write of a rollout must fit etcd's default request limit, 1.5 MiB,
// managed fields included (TestNodeConfigRolloutAPI writes one on a real
// apiserver). Over 5000 nodes (the Kubernetes scalability limit) that all
// held an assignment before, the finished rollout's object encodes in under
// 1 MiB; each node's own reference and pin would take 2.7 MB.
func TestRolloutOver5000NodesFitsEtcd(t *testing.T) {
	now := metav1.NowMicro()
	pin := source.NewPin(cm("kubelet-config-pool-a-7f9c2"), []byte("old bytes"), nil)
	var names []string
	for i := range 5000 {
		names = append(names, fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", i/256, i%256))
	}
	r := New("kube-system", "fleet", Spec{Config: cm("kubelet-config-pool-a-8b1d3"), Nodes: names, MaxUnavailable: intstr.FromString("10%")})
	r.Status.Nodes = map[string]NodeStatus{}
	for _, n := range names {
		r.Status.Nodes[n] = NodeStatus{Phase: Succeeded, Previous: cm("kubelet-config-pool-a-7f9c2"), PreviousPin: pin, Started: &now, Finished: &now}
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if limit := 1 << 20; len(data) > limit {
		t.Errorf("a finished rollout over 5000 nodes encodes in %d bytes (%d per node), over %d", len(data), len(data)/5000, limit)
	}
	t.Logf("a finished rollout over 5000 nodes: %d bytes, %d per node", len(data), len(data)/5000)

	// Its undo sends each node back to its own previous assignment.
	undo, _, err := Plan(Request{Namespace: "kube-system", Name: "undo", UndoOf: r}, Facts{})
	if err != nil {
		t.Fatal(err)
	}
	spec := undo.Spec
	data, err = json.Marshal(New("kube-system", "undo-fleet", spec))
	if err != nil {
		t.Fatal(err)
	}
	if limit := 1 << 20; len(data) > limit {
		t.Errorf("its undo encodes in %d bytes (%d per node), over %d", len(data), len(data)/5000, limit)
	}
	t.Logf("its undo: %d bytes, %d per node", len(data), len(data)/5000)
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
