package rollout

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dkc/dkc/pkg/apis/dkc/v1alpha1"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// A rollout's object does not grow with the fleet: a rollout over a
// selector and its undo, both draining, halted with as many failures and
// as long a reason as the status holds, take at most 16 KiB over 10 000 and
// over 65 000 nodes.
func TestRolloutSizeDoesNotGrowWithTheFleet(t *testing.T) {
	const limit = 16 << 10
	static := []byte("kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\ncpuManagerPolicy: static\n")
	oldPin := source.NewPin(cm("kubelet-config-pool-a-7f9c2"), []byte("old bytes"), []string{"security"})
	long := strings.Repeat("x", 4*v1alpha1.MaxMessageBytes)
	for _, n := range []int{10000, 65000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			nodes := make([]corev1.Node, n)
			for i := range nodes {
				nodes[i] = corev1.Node{ObjectMeta: metav1.ObjectMeta{
					Name:   fmt.Sprintf("ip-10-%d-%d-%d.eu-central-1.compute.internal", i/65536, i/256%256, i%256),
					Labels: map[string]string{"pool": "a"},
				}}
			}
			r, _, err := Plan(Request{
				Namespace: "kube-system", Name: "fleet", Config: cm("kubelet-config-pool-a-8b1d3"), AllowUnsafe: []string{"resource-managers"},
				Selector: "pool=a", BySelector: true, Drain: true, MaxUnavailable: ptr.To(intstr.FromString("10%")),
			}, Facts{Nodes: nodes, Payload: static})
			if err != nil {
				t.Fatal(err)
			}
			r.UID = "fleet-uid"
			halt(r, n, long)
			assertSize(t, r, "the rollout", limit)

			// Its undo, once every node holds its mark.
			for i := range nodes {
				m := &Mark{Rollout: "kube-system/fleet", UID: r.UID, Previous: cm("kubelet-config-pool-a-7f9c2"), PreviousPin: oldPin, Cordoned: true}
				v, err := json.Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				nodes[i].Annotations = map[string]string{MarkAnnotation: string(v)}
			}
			undo, _, err := Plan(Request{Namespace: "kube-system", Name: "undo", UndoOf: r}, Facts{Nodes: nodes})
			if err != nil {
				t.Fatal(err)
			}
			ptrs := make([]*corev1.Node, n)
			for i := range nodes {
				ptrs[i] = &nodes[i]
			}
			view, err := Resolve(undo, ptrs, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(view.Spec.Nodes) != n || len(view.Spec.Drain) != n || !view.Spec.TargetPins[nodes[0].Name].Equal(oldPin) {
				t.Fatalf("the undo covers %d nodes and drains %d, want %d; first pin %v", len(view.Spec.Nodes), len(view.Spec.Drain), n, view.Spec.TargetPins[nodes[0].Name])
			}
			halt(undo, n, long)
			assertSize(t, undo, "its undo", limit)
		})
	}
}

// halt gives r the largest status a halt leaves over n nodes: MaxFailures
// failures and a reason, each of msg, as the driver stores them.
func halt(r *Rollout, n int, msg string) {
	r.Status = Status{State: Halted, Reason: msg, Counts: Counts{Waiting: n - 2*MaxFailures, InProgress: MaxFailures, Failed: MaxFailures}}
	for i := range MaxFailures {
		r.Status.Failures = append(r.Status.Failures, Failure{Node: fmt.Sprintf("ip-10-0-0-%d.eu-central-1.compute.internal", i), Error: msg})
	}
	bound(r)
}

func assertSize(t *testing.T, r *Rollout, what string, limit int) {
	t.Helper()
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > limit {
		t.Errorf("%s encodes in %d bytes, over %d", what, len(data), limit)
	}
	t.Logf("%s: %d bytes", what, len(data))
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
