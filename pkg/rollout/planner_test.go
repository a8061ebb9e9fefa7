package rollout

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dkc/dkc/pkg/flagz"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

func TestPlan(t *testing.T) {
	const (
		ns      = source.DefaultNamespace
		maxPods = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 50\n"
		static  = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\ncpuManagerPolicy: static\n"
	)
	// node is a Ready node that reports active config (none: its local
	// config), with its InternalIP.
	node := func(name, active, ip string) corev1.Node {
		n := readyNode(name, nil)
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
		if active != "" {
			n.Annotations = map[string]string{source.StatusAnnotation: `{"active":{"configMap":{"namespace":"kube-system","name":"` + active + `","kubeletConfigKey":"kubelet"}}}`}
		}
		return *n
	}
	configs := map[string]*kubeletconfigv1beta1.KubeletConfiguration{
		ConfigKey(cm("static")): {CPUManagerPolicy: "static"},
		ConfigKey(cm("pods")):   {MaxPods: 50},
	}
	fleet := []corev1.Node{node("n2", "pods", "10.0.0.2"), node("n1", "static", "10.0.0.1"), node("n3", "", "10.0.0.3")}
	// defaults is the spec of a rollout of config with payload over
	// nodes, as Plan makes it by default.
	defaults := func(config string, payload string, nodes ...string) Spec {
		return Spec{
			Config: cm(config), Pin: source.NewPin(cm(config), []byte(payload), nil), Nodes: nodes,
			MaxUnavailable: intstr.FromInt32(1), Canary: 1,
			DrainOptions: DrainSpec{Timeout: metav1.Duration{Duration: 5 * time.Minute}},
		}
	}
	running := func(name string, n ...string) *Rollout {
		return New(ns, name, Spec{Config: cm("other"), Nodes: n, MaxUnavailable: intstr.FromInt32(1)})
	}
	at := metav1.NewMicroTime(time.Date(2026, 11, 28, 23, 0, 0, 0, time.UTC))
	orig := New(ns, "r1", Spec{
		Config: cm("static"), Selector: "pool=a",
		MaxUnavailable: intstr.FromString("50%"), Canary: 2, DrainAll: true,
		DrainOptions: DrainSpec{Timeout: metav1.Duration{Duration: time.Minute}, Force: true},
	})
	orig.UID = r1UID
	// The nodes, as r1's marks left them.
	marked := func(n corev1.Node, m *Mark) corev1.Node {
		m.Rollout, m.UID = "kube-system/r1", r1UID
		return *withMark(t, &n, m)
	}
	securityPin := source.NewPin(cm("pods"), []byte("pods"), []string{"security"})
	undone := []corev1.Node{
		marked(node("n1", "static", "10.0.0.1"), &Mark{Previous: cm("pods"), PreviousPin: securityPin, Cordoned: true, Started: at}),
		marked(node("n2", "", "10.0.0.2"), &Mark{Cordoned: true, Started: at}), // was on its local config; failed
		node("n3", "static", "10.0.0.3"), // ran the target already
		marked(node("n4", "", "10.0.0.4"), &Mark{Previous: cm("older"), Started: at}),
		marked(node("n5", "", "10.0.0.5"), &Mark{Previous: cm("pods"), Started: at}), // marked, not assigned yet
		node("n6", "", "10.0.0.6"),                                                   // assigned by hand, not marked
	}
	// The undo covers the nodes r1's marks name, and drains each: n1 runs
	// static and goes back to pods, and r1 drained n2.
	undo := Spec{
		MaxUnavailable: intstr.FromString("50%"), Canary: 2,
		DrainOptions: DrainSpec{Timeout: metav1.Duration{Duration: time.Minute}, Force: true},
		UndoOf:       "r1", UndoOfUID: r1UID, AllowUnsafe: []string{"security"}, DrainAll: true,
	}
	untouched := New(ns, "r2", Spec{Config: cm("new"), Nodes: []string{"n1"}})
	untouched.UID = "uid-r2"
	untouched.Status.Nodes = map[string]NodeStatus{"n1": {Phase: InProgress}} // assigned by hand

	tests := map[string]struct {
		req          Request
		facts        Facts
		want         *Rollout
		wantWarnings []string
		wantErr      string
	}{
		"defaults: budget 1, canary 1, drain timeout 5m; named after the config; nodes by name": {
			req:   Request{Namespace: ns, Suffix: "x1y2z", Config: cm("pods")},
			facts: Facts{Nodes: []corev1.Node{fleet[2], fleet[0]}, Payload: []byte(maxPods), Configs: configs},
			want:  New(ns, "pods-x1y2z", defaults("pods", maxPods, "n2", "n3")),
		},
		"the request's strategy, name and pin": {
			req: Request{
				Namespace: ns, Name: "mine", Config: cm("pods"), AllowUnsafe: []string{"security"}, Selector: "pool=a",
				MaxUnavailable: ptr.To(intstr.FromString("10%")), Canary: ptr.To(0), Soak: time.Minute,
				DrainTimeout: ptr.To(time.Duration(0)), DrainForce: true, DrainDeleteEmptyDirData: true,
			},
			facts: Facts{Nodes: fleet[:1], Payload: []byte(maxPods), Configs: configs},
			want: New(ns, "mine", Spec{
				Config: cm("pods"), Pin: source.NewPin(cm("pods"), []byte(maxPods), []string{"security"}), Nodes: []string{"n2"},
				Selector: "pool=a", MaxUnavailable: intstr.FromString("10%"), Canary: 0, Soak: metav1.Duration{Duration: time.Minute},
				DrainOptions: DrainSpec{Force: true, DeleteEmptyDirData: true},
			}),
		},
		"a pin given (a pool's revision) is kept": {
			req:   Request{Namespace: ns, Name: "p-1", Config: cm("pods"), Pin: source.NewPin(cm("pods"), []byte("as first read"), nil)},
			facts: Facts{Nodes: fleet[:1], Payload: []byte(maxPods), Configs: configs},
			want: func() *Rollout {
				s := defaults("pods", maxPods, "n2")
				s.Pin = source.NewPin(cm("pods"), []byte("as first read"), nil)
				return New(ns, "p-1", s)
			}(),
		},
		"a long config name is cut to 40 characters, without a trailing dash": {
			req:   Request{Namespace: ns, Suffix: "x1y2z", Config: cm(strings.Repeat("a", 39) + "-bcdef")},
			facts: Facts{Nodes: fleet[:1], Payload: []byte(maxPods)},
			want:  New(ns, strings.Repeat("a", 39)+"-x1y2z", defaults(strings.Repeat("a", 39)+"-bcdef", maxPods, "n2")),
		},
		"no nodes": {
			req:     Request{Namespace: ns, Config: cm("pods")},
			facts:   Facts{Payload: []byte(maxPods)},
			wantErr: "no nodes to roll out to",
		},
		"drain: only where the change needs it; a node whose config is unknown counts as the defaults": {
			req:   Request{Namespace: ns, Name: "s", Config: cm("static"), AllowUnsafe: []string{"resource-managers"}, Drain: true},
			facts: Facts{Nodes: fleet, Payload: []byte(static), Configs: configs},
			want: func() *Rollout {
				s := defaults("static", static, "n1", "n2", "n3")
				s.Pin = source.NewPin(cm("static"), []byte(static), []string{"resource-managers"})
				s.Drain = []string{"n2", "n3"}
				return New(ns, "s", s)
			}(),
		},
		"drain: a kubelet's /configz outranks the ConfigMap it reports": {
			req: Request{Namespace: ns, Name: "s", Config: cm("static"), AllowUnsafe: []string{"resource-managers"}, Drain: true},
			facts: Facts{Nodes: fleet, Payload: []byte(static), Configs: configs, Live: map[string]*kubeletconfigv1beta1.KubeletConfiguration{
				"n2": {CPUManagerPolicy: "static"}, "n3": {CPUManagerPolicy: "static"},
			}},
			want: func() *Rollout {
				s := defaults("static", static, "n1", "n2", "n3")
				s.Pin = source.NewPin(cm("static"), []byte(static), []string{"resource-managers"})
				return New(ns, "s", s)
			}(),
		},
		"drain: leaving a policy for the default drains the node that ran it": {
			req:   Request{Namespace: ns, Name: "p", Config: cm("pods"), AllowUnsafe: []string{"resource-managers"}, Drain: true},
			facts: Facts{Nodes: fleet, Payload: []byte(maxPods), Configs: configs},
			want: func() *Rollout {
				s := defaults("pods", maxPods, "n1", "n2", "n3")
				s.Pin = source.NewPin(cm("pods"), []byte(maxPods), []string{"resource-managers"})
				s.Drain = []string{"n1"}
				return New(ns, "p", s)
			}(),
		},
		"drain: refused when the request does not allow it, naming the first node": {
			req:     Request{Namespace: ns, Name: "s", Config: cm("static"), AllowUnsafe: []string{"resource-managers"}},
			facts:   Facts{Nodes: fleet, Payload: []byte(static), Configs: configs},
			wantErr: `config kube-system/static changes cpuManagerPolicy "" -> "static" on node/n2 and 1 more nodes: the kubelet must not run pods through that change: add --drain (a pool: spec.strategy.drain: true) to cordon and drain each such node first`,
		},
		"drain: refused when the pin does not allow the class": {
			req:     Request{Namespace: ns, Name: "s", Config: cm("static"), Drain: true},
			facts:   Facts{Nodes: fleet, Payload: []byte(static), Configs: configs},
			wantErr: `config kube-system/static changes cpuManagerPolicy "" -> "static" (resource-managers), which the agents refuse unless the rollout allows it: add --allow-unsafe=resource-managers (a pool: spec.allowUnsafe)`,
		},
		"to-local: a node whose config sets a policy drains; the agents do not check a local config": {
			req:   Request{Namespace: ns, Suffix: "x1y2z", Drain: true},
			facts: Facts{Nodes: fleet, Configs: configs},
			want: New(ns, "to-local-x1y2z", Spec{
				Nodes: []string{"n1", "n2", "n3"}, MaxUnavailable: intstr.FromInt32(1), Canary: 1,
				DrainOptions: DrainSpec{Timeout: metav1.Duration{Duration: 5 * time.Minute}}, Drain: []string{"n1"},
			}),
		},
		"a field a kubelet flag sets is refused: the Node's record first, else what the caller read": {
			req: Request{Namespace: ns, Name: "pods", Config: cm("pods")},
			facts: Facts{Nodes: func() []corev1.Node {
				nodes := []corev1.Node{node("n1", "", "10.0.0.1"), node("n2", "", "10.0.0.2"), node("n3", "", "10.0.0.3")}
				nodes[0].Annotations = map[string]string{flagz.Annotation: `[{"field":"maxPods","flag":"max-pods","value":"42"}]`}
				nodes[1].Annotations = map[string]string{flagz.Annotation: `[]`}
				return nodes
			}(), Payload: []byte(maxPods), Flags: map[string][]flagz.Shadow{
				"n2": {{Field: "maxPods", Flag: "max-pods", Value: "7"}}, // read before the agent recorded []
				"n3": {{Field: "maxPods", Flag: "max-pods", Value: "43"}},
			}},
			wantErr: `the config changes fields that a kubelet flag sets, and a flag always wins over a config: node "n1": maxPods (set by --max-pods=42); node "n3": maxPods (set by --max-pods=43): remove the flag from the kubelet's command line (kubeadm: KUBELET_EXTRA_ARGS, kubeletExtraArgs), or leave the field out of the config`,
		},
		"a flag's own value is no change": {
			req: Request{Namespace: ns, Name: "pods", Config: cm("pods")},
			facts: Facts{Nodes: []corev1.Node{fleet[0]}, Payload: []byte(maxPods), Flags: map[string][]flagz.Shadow{
				"n2": {{Field: "maxPods", Flag: "max-pods", Value: "50"}},
			}},
			want: New(ns, "pods", defaults("pods", maxPods, "n2")),
		},
		"node-specific fields: one node's address for many is refused": {
			req:     Request{Namespace: ns, Name: "snap", Config: cm("snap")},
			facts:   Facts{Nodes: fleet, Payload: []byte("kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\naddress: 10.0.0.1\n")},
			wantErr: `config kube-system/snap sets node-specific fields to one node's values while the target nodes differ: address "10.0.0.1" (the value of n1; 2 other target nodes run another). Remove these fields from the config, or run the agents with --apply-mode=dropin and roll out a partial config with only the fields you change (docs/rollout.md, "One config for every node")`,
		},
		"node-specific fields: one node's address for that node alone passes": {
			req:   Request{Namespace: ns, Name: "snap", Config: cm("snap")},
			facts: Facts{Nodes: fleet[1:2], Payload: []byte("kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\naddress: 10.0.0.1\n")},
			want:  New(ns, "snap", defaults("snap", "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\naddress: 10.0.0.1\n", "n1")),
		},
		"overlap: refused by default": {
			req:     Request{Namespace: ns, Name: "p", Config: cm("pods")},
			facts:   Facts{Nodes: fleet, Payload: []byte(maxPods), Rollouts: []*Rollout{running("busy", "n3")}},
			wantErr: `rollout "busy" is Running over node/n3: finish it (kubectl dkc rollout resume busy) or abort it (kubectl dkc rollout abort busy) first`,
		},
		"overlap: with WaitOnOverlap the node is left out, and waits": {
			req:          Request{Namespace: ns, Name: "p", Config: cm("pods"), Overlap: WaitOnOverlap},
			facts:        Facts{Nodes: fleet, Payload: []byte(maxPods), Rollouts: []*Rollout{running("busy", "n3")}},
			want:         New(ns, "p", defaults("pods", maxPods, "n1", "n2")),
			wantWarnings: []string{"node/n3 waits for rollout busy (Running) to end"},
		},
		"overlap: with WaitOnOverlap and every node covered, the overlap is the error": {
			req:     Request{Namespace: ns, Name: "p", Config: cm("pods"), Overlap: WaitOnOverlap},
			facts:   Facts{Nodes: fleet[2:], Payload: []byte(maxPods), Rollouts: []*Rollout{running("busy", "n3")}},
			wantErr: `rollout "busy" is Running over node/n3: finish it (kubectl dkc rollout resume busy) or abort it (kubectl dkc rollout abort busy) first`,
		},
		"overlap: a finished rollout covers nothing": {
			req: Request{Namespace: ns, Name: "p", Config: cm("pods")},
			facts: Facts{Nodes: fleet[2:], Payload: []byte(maxPods), Rollouts: []*Rollout{func() *Rollout {
				r := running("done", "n3")
				r.Status.State = Done
				return r
			}()}},
			want: New(ns, "p", defaults("pods", maxPods, "n3")),
		},
		"a config that does not decode is the agents' to refuse": {
			req:          Request{Namespace: ns, Name: "bad", Config: cm("bad")},
			facts:        Facts{Nodes: fleet[:1], Payload: []byte("kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: many\n")},
			want:         New(ns, "bad", defaults("bad", "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: many\n", "n2")),
			wantWarnings: []string{`config kube-system/bad does not decode (load kubelet config: maxPods: cannot decode string as int32): the agents will refuse it`},
		},
		"undo: every node the rollout marked goes back, under the undone rollout's strategy and drains": {
			req:          Request{Namespace: ns, Suffix: "x1y2z", UndoOf: orig},
			facts:        Facts{Nodes: undone, Configs: configs, Rollouts: []*Rollout{orig}},
			want:         New(ns, "undo-r1-x1y2z", undo),
			wantWarnings: []string{"2 of 4 nodes need a drain; the undo drains every node it sends back"},
		},
		"undo: one that needs no drain drains none": {
			req:   Request{Namespace: ns, Name: "u", UndoOf: orig},
			facts: Facts{Nodes: undone[3:], Configs: configs},
			want: func() *Rollout {
				s := undo
				s.DrainAll, s.AllowUnsafe = false, nil
				return New(ns, "u", s)
			}(),
		},
		"undo: the request's budget and canary": {
			req:   Request{Namespace: ns, Name: "u", UndoOf: orig, MaxUnavailable: ptr.To(intstr.FromInt32(3)), Canary: ptr.To(0)},
			facts: Facts{Nodes: undone, Configs: configs},
			want: func() *Rollout {
				s := undo
				s.MaxUnavailable, s.Canary = intstr.FromInt32(3), 0
				return New(ns, "u", s)
			}(),
			wantWarnings: []string{"2 of 4 nodes need a drain; the undo drains every node it sends back"},
		},
		"undo: another rollout over its nodes is refused": {
			req:     Request{Namespace: ns, Name: "u", UndoOf: orig},
			facts:   Facts{Nodes: undone, Rollouts: []*Rollout{orig, running("busy", "n4")}},
			wantErr: `rollout "busy" is Running over node/n4: finish it (kubectl dkc rollout resume busy) or abort it (kubectl dkc rollout abort busy) first`,
		},
		"undo: of a rollout not read from the cluster is refused": {
			req:     Request{Namespace: ns, Name: "u", UndoOf: New(ns, "r3", Spec{})},
			facts:   Facts{Nodes: undone},
			wantErr: `undo of rollout "r3": it has no UID, which its nodes' marks name: read it from the cluster`,
		},
		"undo: a rollout that marked no node started none": {
			req:     Request{Namespace: ns, Name: "u", UndoOf: untouched},
			facts:   Facts{Nodes: undone},
			wantErr: "nothing to undo: the rollout started no node",
		},
		"by selector: the rollout covers the selector and does not list its nodes": {
			req:   Request{Namespace: ns, Name: "p", Config: cm("pods"), Selector: "pool=a", BySelector: true},
			facts: Facts{Nodes: []corev1.Node{fleet[0], fleet[2]}, Payload: []byte(maxPods), Configs: configs},
			want: func() *Rollout {
				s := defaults("pods", maxPods)
				s.Selector = "pool=a"
				return New(ns, "p", s)
			}(),
		},
		"by selector: when a node needs a drain, every node drains": {
			req:   Request{Namespace: ns, Name: "s", Config: cm("static"), AllowUnsafe: []string{"resource-managers"}, Drain: true, BySelector: true},
			facts: Facts{Nodes: fleet, Payload: []byte(static), Configs: configs},
			want: func() *Rollout {
				s := defaults("static", static)
				s.Pin = source.NewPin(cm("static"), []byte(static), []string{"resource-managers"})
				s.DrainAll = true
				return New(ns, "s", s)
			}(),
			wantWarnings: []string{"2 of 3 nodes need a drain; a rollout over a selector drains every node it starts (name the nodes to drain only those)"},
		},
		"by selector: with WaitOnOverlap, nodes left out: the rollout lists the others": {
			req:          Request{Namespace: ns, Name: "p", Config: cm("pods"), Overlap: WaitOnOverlap, BySelector: true},
			facts:        Facts{Nodes: fleet, Payload: []byte(maxPods), Rollouts: []*Rollout{running("busy", "n3")}},
			want:         New(ns, "p", defaults("pods", maxPods, "n1", "n2")),
			wantWarnings: []string{"node/n3 waits for rollout busy (Running) to end"},
		},
		"by selector: a rollout over a selector overlaps the nodes it started that left its selector": {
			req: Request{Namespace: ns, Name: "p", Config: cm("pods"), BySelector: true},
			facts: Facts{
				Nodes:   []corev1.Node{fleet[0], fleet[1], *withMark(t, fleet[2].DeepCopy(), &Mark{Rollout: ns + "/zone", UID: "uid-zone", Started: at})},
				Payload: []byte(maxPods),
				Rollouts: []*Rollout{func() *Rollout {
					r := running("zone")
					r.UID, r.Spec.Selector = "uid-zone", "zone=gone"
					return r
				}()},
			},
			wantErr: `rollout "zone" is Running over node/n3: finish it (kubectl dkc rollout resume zone) or abort it (kubectl dkc rollout abort zone) first`,
		},
		"by selector: another rollout over a selector overlaps the nodes it selects": {
			req: Request{Namespace: ns, Name: "p", Config: cm("pods"), BySelector: true},
			facts: Facts{Nodes: fleet, Payload: []byte(maxPods), Rollouts: []*Rollout{func() *Rollout {
				r := running("zone", "")
				r.Spec.Nodes = nil // every node
				return r
			}()}},
			wantErr: `rollout "zone" is Running over node/n1: finish it (kubectl dkc rollout resume zone) or abort it (kubectl dkc rollout abort zone) first`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, warnings, err := Plan(tc.req, tc.facts)
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("rollout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWarnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAllowedClasses(t *testing.T) {
	r := New("kube-system", "u", Spec{
		Pin:        source.NewPin(cm("a"), []byte("a"), []string{"security"}),
		TargetPins: TargetPins{"n1": source.NewPin(cm("b"), []byte("b"), []string{"redirect", "security"}), "n2": nil},
	})
	if diff := cmp.Diff([]string{"redirect", "security"}, AllowedClasses(r)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestUndoTakesBackTheNodesTheRolloutMarked: an undo covers the nodes
// whose mark names the rollout (Resolve), each going back to the
// assignment its mark recorded; not a node another rollout marked since,
// one that ran the target already, one assigned it by hand, or one never
// started. Its object lists none of them.
func TestUndoTakesBackTheNodesTheRolloutMarked(t *testing.T) {
	orig := New(source.DefaultNamespace, "r1", Spec{Config: cm("new"), Nodes: fleetOf(6), MaxUnavailable: intstr.FromInt32(1)})
	orig.UID = r1UID
	oldPin := source.NewPin(cm("old"), []byte("old"), nil)
	nodes := []*corev1.Node{
		// done, from old
		withMark(t, runningOn(t, readyNode("n1", nil), cm("new")), &Mark{Rollout: "kube-system/r1", UID: r1UID, Previous: cm("old"), PreviousPin: oldPin}),
		// marked, not assigned yet, from its local config
		withMark(t, readyNode("n2", nil), markOf(nil, false)),
		// started by r1, then by a later rollout: the later one's to undo
		withMark(t, runningOn(t, readyNode("n3", nil), cm("later")), &Mark{Rollout: "kube-system/later", UID: "uid-later", Previous: cm("new")}),
		// ran the target already
		runningOn(t, readyNode("n4", nil), cm("new")),
		// assigned the target by hand
		readyNode("n5", nil),
		// never started
		readyNode("n6", nil),
	}
	patched, err := source.PatchedNode(nodes[4], mustAssignPatch(t, cm("new")))
	if err != nil {
		t.Fatal(err)
	}
	nodes[4] = patched
	facts := Facts{}
	for _, n := range nodes {
		facts.Nodes = append(facts.Nodes, *n)
	}
	undo, _, err := Plan(Request{Namespace: source.DefaultNamespace, Name: "u", UndoOf: orig}, facts)
	if err != nil {
		t.Fatal(err)
	}
	want := Spec{MaxUnavailable: intstr.FromInt32(1), UndoOf: "r1", UndoOfUID: r1UID}
	if diff := cmp.Diff(want, undo.Spec); diff != "" {
		t.Errorf("undo (-want +got):\n%s", diff)
	}
	view, err := Resolve(undo, nodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantView := want
	wantView.Nodes = []string{"n1", "n2"}
	wantView.Targets, wantView.TargetPins = Targets{"n1": cm("old"), "n2": nil}, TargetPins{"n1": oldPin}
	if diff := cmp.Diff(wantView, view.Spec); diff != "" {
		t.Errorf("undo's nodes (-want +got):\n%s", diff)
	}

	// Without the nodes, it has nothing to undo.
	if _, _, err := Plan(Request{Namespace: source.DefaultNamespace, Name: "u", UndoOf: orig}, Facts{}); !errors.Is(err, ErrNothingToUndo) {
		t.Errorf("undo without the nodes: %v, want ErrNothingToUndo", err)
	}
}
