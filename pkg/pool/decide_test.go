package pool

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dkc/dkc/pkg/flagz"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

var now = time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC)

const staticPayload = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\ncpuManagerPolicy: static\n"

func ref(name string) *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: name, KubeletConfigKey: "kubelet"}}
}

func newPool(name, config string, selector map[string]string) *Pool {
	return &Pool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Generation: 1, UID: "uid-" + types.UID(name)},
		Spec:       Spec{NodeSelector: metav1.LabelSelector{MatchLabels: selector}, ConfigSource: *ref(config)},
	}
}

// node returns a Ready node with labels, assigned config (pinned to its
// payload) when config is not empty, and running it when active.
func node(name string, labels map[string]string, config string, active bool) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{}},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	if config == "" {
		return n
	}
	src := ref(config)
	b, _ := json.Marshal(src)
	n.Annotations[source.AssignedAnnotation] = string(b)
	pin, _ := json.Marshal(source.NewPin(src, []byte(config), nil))
	n.Annotations[source.PinAnnotation] = string(pin)
	if active {
		st := struct {
			corev1.NodeConfigStatus
			Pin *source.Pin `json:"pin"`
		}{corev1.NodeConfigStatus{Assigned: src, Active: src}, source.NewPin(src, []byte(config), nil)}
		b, _ := json.Marshal(st)
		n.Annotations[source.StatusAnnotation] = string(b)
	}
	return n
}

// pending is n with the startup taint it registered with.
func pending(n *corev1.Node) *corev1.Node {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "other", Effect: corev1.TaintEffectNoExecute}, corev1.Taint{Key: source.StartupTaint, Effect: corev1.TaintEffectNoSchedule})
	return n
}

// poolRollout is rollout name of pool p's revision rev to config, in state.
func poolRollout(p *Pool, name string, rev int, config string, state rollout.State, generation int64, nodes ...string) *rollout.Rollout {
	r := rollout.New("kube-system", name, rollout.Spec{Config: ref(config), Pin: source.NewPin(ref(config), []byte(config), nil), Nodes: nodes, MaxUnavailable: intstr.FromInt32(1)})
	r.Labels = map[string]string{Label: p.Name, RevisionLabel: strconv.Itoa(rev)}
	r.Annotations = map[string]string{GenerationAnnotation: strconv.FormatInt(generation, 10)}
	r.Status.State = state
	if state == rollout.Aborted {
		r.Spec.Aborted = true
	}
	r.CreationTimestamp = metav1.NewTime(now.Add(time.Duration(rev) * time.Minute))
	return r
}

func TestDecide(t *testing.T) {
	workers := map[string]string{"pool": "workers"}
	for name, tc := range map[string]struct {
		in     func(p *Pool) Input
		create []string // the nodes of the rollout created, in order; nil: none
		lists  bool     // the rollout created lists its nodes rather than cover the selector
		name   string   // its name
		drain  []string // the nodes it drains
		join   []string // the nodes assigned outside any rollout
		// planned: Decide planned the rollout to create or refused it for
		// its drains, which depend on Input.Configs.
		planned bool
		abort   []string
		pause   []string
		resume  []string
		cond    string // the condition that is True
		reason  string
		msg     []string // what its message says, among other words
		counts  Counts
	}{
		"a new pool rolls its config out over the nodes it selects, and only those": {
			in: func(p *Pool) Input {
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{
					node("n2", workers, "", false), node("n1", workers, "", false), node("other", nil, "", false),
				}}
			},
			create: []string{"n1", "n2"}, name: "workers-1",
			cond: Reconciling, reason: "RollingOut", counts: Counts{Selected: 2, Available: 2},
		},
		"a pool whose nodes all run its config is Ready, and creates nothing": {
			in: func(p *Pool) Input {
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "a", true), node("n2", workers, "a", true)},
					Rollouts: []*rollout.Rollout{poolRollout(p, "workers-1", 1, "a", rollout.Done, 1, "n1", "n2")}}
			},
			cond: Ready, reason: "Updated", counts: Counts{Selected: 2, Updated: 2, Available: 2},
		},
		"while its rollout runs, the pool waits": {
			in: func(p *Pool) Input {
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "a", true), node("n2", workers, "", false)},
					Rollouts: []*rollout.Rollout{poolRollout(p, "workers-1", 1, "a", rollout.Running, 1, "n1", "n2")}}
			},
			cond: Reconciling, reason: "RollingOut", counts: Counts{Selected: 2, Updated: 1, Available: 2},
		},
		"while a node of its rollout waits for a PodDisruptionBudget, the pool says which": {
			in: func(p *Pool) Input {
				r := poolRollout(p, "workers-1", 1, "a", rollout.Running, 1, "n1", "n2")
				r.Status.Reason = "node/n1: draining: eviction of pod ns/web-0 blocked by PodDisruptionBudget ns/web"
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "", false), node("n2", workers, "", false)},
					Rollouts: []*rollout.Rollout{r}}
			},
			cond: Reconciling, reason: "RollingOut", msg: []string{"workers-1", "node/n1: draining: eviction of pod ns/web-0 blocked by PodDisruptionBudget ns/web"}, counts: Counts{Selected: 2, Available: 2},
		},
		"while its rollout waits for a window, the pool says when it opens": {
			in: func(p *Pool) Input {
				r := poolRollout(p, "workers-1", 1, "a", rollout.Running, 1, "n1", "n2")
				r.Status.Reason = "OutsideWindow: no node starts before the next maintenance window, at 2026-11-26T22:00:00Z"
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "", false), node("n2", workers, "", false)},
					Rollouts: []*rollout.Rollout{r}}
			},
			cond: Reconciling, reason: "OutsideWindow", msg: []string{"workers-1", "at 2026-11-26T22:00:00Z"}, counts: Counts{Selected: 2, Available: 2},
		},
		"a pool's windows go into its rollouts": {
			in: func(p *Pool) Input {
				p.Spec.Strategy.Windows = rollout.Windows{{Days: []string{"Thu"}, Start: "22:00", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Europe/Berlin"}}
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "", false)}}
			},
			create: []string{"n1"}, name: "workers-1",
			cond: Reconciling, reason: "RollingOut", counts: Counts{Selected: 1, Available: 1},
		},
		"a window in a time zone that does not exist stalls the pool": {
			in: func(p *Pool) Input {
				p.Spec.Strategy.Windows = rollout.Windows{{Days: []string{"Thu"}, Start: "22:00", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Europe/Nowhere"}}
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "", false)}}
			},
			cond: Stalled, reason: "InvalidWindow", msg: []string{`spec.strategy.windows[0]: time zone "Europe/Nowhere"`},
		},
		"while an alert holds its rollout, the pool names the alert": {
			in: func(p *Pool) Input {
				r := poolRollout(p, "workers-1", 1, "a", rollout.Running, 1, "n1", "n2")
				r.Status.Reason = `PausedOnAlert: alert "NodeDown" is firing on http://am:9093; no node starts until it clears`
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "", false), node("n2", workers, "", false)},
					Rollouts: []*rollout.Rollout{r}}
			},
			cond: Reconciling, reason: "PausedOnAlert", msg: []string{"workers-1", `alert "NodeDown" is firing`}, counts: Counts{Selected: 2, Available: 2},
		},
		"while its rollout's Alertmanager does not answer, the pool says so": {
			in: func(p *Pool) Input {
				r := poolRollout(p, "workers-1", 1, "a", rollout.Running, 1, "n1")
				r.Status.Reason = "AlertsUnknown: no node starts until Alertmanager http://am:9093 answers: connection refused"
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "", false)}, Rollouts: []*rollout.Rollout{r}}
			},
			cond: Reconciling, reason: "AlertsUnknown", msg: []string{"workers-1", "connection refused"}, counts: Counts{Selected: 1, Available: 1},
		},
		"an Alertmanager the controller may not ask stalls the pool": {
			in: func(p *Pool) Input {
				r := poolRollout(p, "workers-1", 1, "a", rollout.Running, 1, "n1")
				r.Status.Reason = "AlertmanagerNotAllowed: no node starts: the controller asks only the Alertmanagers it was started with (--alertmanager-url), and http://169.254.169.254 is not one of them"
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "", false)}, Rollouts: []*rollout.Rollout{r}}
			},
			cond: Stalled, reason: "AlertmanagerNotAllowed", msg: []string{"http://169.254.169.254 is not one of them", "--alertmanager-url list this one"}, counts: Counts{Selected: 1, Available: 1},
		},
		"a pool's pauseOnAlerts go into its rollouts": {
			in: func(p *Pool) Input {
				p.Spec.Strategy.PauseOnAlerts = &rollout.PauseOnAlerts{Alertmanager: "http://am:9093", Matchers: []string{"severity=critical"}}
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "", false)}}
			},
			create: []string{"n1"}, name: "workers-1",
			cond: Reconciling, reason: "RollingOut", counts: Counts{Selected: 1, Available: 1},
		},
		"an alert matcher that does not parse stalls the pool": {
			in: func(p *Pool) Input {
				p.Spec.Strategy.PauseOnAlerts = &rollout.PauseOnAlerts{Alertmanager: "http://am:9093", Matchers: []string{"critical"}}
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "", false)}}
			},
			cond: Stalled, reason: "InvalidPauseOnAlerts", msg: []string{`spec.strategy.pauseOnAlerts.matchers[0]: alert matcher "critical"`},
		},
		"a changed config is a new revision, and supersedes the one under way": {
			in: func(p *Pool) Input {
				p.Spec.ConfigSource = *ref("b")
				return Input{Pool: p, Payload: []byte("b"), Nodes: []*corev1.Node{node("n1", workers, "a", true), node("n2", workers, "", false)},
					Rollouts: []*rollout.Rollout{poolRollout(p, "workers-1", 1, "a", rollout.Running, 1, "n1", "n2")}}
			},
			create: []string{"n1", "n2"}, name: "workers-2", abort: []string{"workers-1"},
			cond: Reconciling, reason: "RollingOut", counts: Counts{Selected: 2, Available: 2},
		},
		"a node that joins after its revision rolled out gets it in a rollout of its own": {
			in: func(p *Pool) Input {
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "a", true), node("n3", workers, "", false)},
					Rollouts: []*rollout.Rollout{poolRollout(p, "workers-1", 1, "a", rollout.Done, 1, "n1")}}
			},
			create: []string{"n3"}, name: "workers-1-2",
			cond: Reconciling, reason: "RollingOut", counts: Counts{Selected: 2, Updated: 1, Available: 2},
		},
		"a node that registers with the startup taint gets the current revision at once, outside any rollout": {
			in: func(p *Pool) Input {
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "a", true), pending(node("n3", workers, "", false))},
					Rollouts: []*rollout.Rollout{poolRollout(p, "workers-1", 1, "a", rollout.Done, 1, "n1")}}
			},
			join: []string{"n3"},
			cond: Reconciling, reason: "Applying", counts: Counts{Selected: 2, Updated: 1, Available: 2},
		},
		"a new pool assigns its joining nodes at once and rolls out over the others": {
			in: func(p *Pool) Input {
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "", false), pending(node("n2", workers, "", false))}}
			},
			create: []string{"n1"}, name: "workers-1", join: []string{"n2"},
			cond: Reconciling, reason: "RollingOut", counts: Counts{Selected: 2, Available: 2},
		},
		"a joining node that holds an older revision gets the current one at once": {
			in: func(p *Pool) Input {
				p.Spec.ConfigSource = *ref("b")
				return Input{Pool: p, Payload: []byte("b"), Nodes: []*corev1.Node{node("n1", workers, "b", true), pending(node("n2", workers, "a", true))},
					Rollouts: []*rollout.Rollout{poolRollout(p, "workers-1", 1, "a", rollout.Done, 1, "n1", "n2"), poolRollout(p, "workers-2", 2, "b", rollout.Done, 1, "n1")}}
			},
			join: []string{"n2"},
			cond: Reconciling, reason: "Applying", counts: Counts{Selected: 2, Updated: 1, Available: 2},
		},
		"a joining node that holds the current revision waits for its agent": {
			in: func(p *Pool) Input {
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "a", true), pending(node("n3", workers, "a", false))},
					Rollouts: []*rollout.Rollout{poolRollout(p, "workers-1", 1, "a", rollout.Done, 1, "n1")}}
			},
			cond: Reconciling, reason: "Applying", counts: Counts{Selected: 2, Updated: 1, Available: 2},
		},
		"a paused pool still configures a joining node: pausing holds the budget, and a joining node is outside it": {
			in: func(p *Pool) Input {
				p.Spec.Paused = true
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "", false), pending(node("n2", workers, "", false))}}
			},
			join: []string{"n2"},
			cond: Reconciling, reason: "Paused", counts: Counts{Selected: 2, Available: 2},
		},
		"a halted revision is given to no joining node: it keeps its taint": {
			in: func(p *Pool) Input {
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "", false), pending(node("n2", workers, "", false))},
					Rollouts: []*rollout.Rollout{poolRollout(p, "workers-1", 1, "a", rollout.Halted, 1, "n1")}}
			},
			cond: Stalled, reason: "RolloutHalted", counts: Counts{Selected: 2, Available: 2},
		},
		"a joining node that another unfinished rollout covers waits for it": {
			in: func(p *Pool) Input {
				other := poolRollout(newPool("x", "x", nil), "manual", 1, "x", rollout.Running, 1, "n2")
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "a", true), pending(node("n2", workers, "", false))},
					Rollouts: []*rollout.Rollout{poolRollout(p, "workers-1", 1, "a", rollout.Done, 1, "n1")}, Foreign: []*rollout.Rollout{other}}
			},
			cond: Reconciling, reason: "Applying", counts: Counts{Selected: 2, Updated: 1, Available: 2},
		},
		"a node that another pool selects too is reported, and neither pool touches it": {
			in: func(p *Pool) Input {
				other := newPool("gpu", "g", map[string]string{"gpu": "true"})
				both := map[string]string{"pool": "workers", "gpu": "true"}
				return Input{Pool: p, Others: []*Pool{p, other}, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "", false), node("n9", both, "", false)}}
			},
			create: []string{"n1"}, lists: true, name: "workers-1",
			cond: Reconciling, reason: "RollingOut", counts: Counts{Selected: 1, Available: 1, Conflicting: 1},
		},
		"a halted rollout stalls its revision until the pool's spec changes": {
			in: func(p *Pool) Input {
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "", false)},
					Rollouts: []*rollout.Rollout{poolRollout(p, "workers-1", 1, "a", rollout.Halted, 1, "n1")}}
			},
			cond: Stalled, reason: "RolloutHalted", counts: Counts{Selected: 1, Available: 1},
		},
		"after a halt, a change of the pool's spec tries again": {
			in: func(p *Pool) Input {
				p.Generation = 2
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "", false)},
					Rollouts: []*rollout.Rollout{poolRollout(p, "workers-1", 1, "a", rollout.Halted, 1, "n1")}}
			},
			create: []string{"n1"}, name: "workers-1-2",
			cond: Reconciling, reason: "RollingOut", counts: Counts{Selected: 1, Available: 1},
		},
		"an aborted rollout stalls its revision too": {
			in: func(p *Pool) Input {
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "", false)},
					Rollouts: []*rollout.Rollout{poolRollout(p, "workers-1", 1, "a", rollout.Aborted, 1, "n1")}}
			},
			cond: Stalled, reason: "RolloutAborted", counts: Counts{Selected: 1, Available: 1},
		},
		"bytes that differ from spec.digest stall the pool, and nothing is created": {
			in: func(p *Pool) Input {
				p.Spec.Digest = source.Digest([]byte("what git holds"))
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "", false)}}
			},
			cond: Stalled, reason: "DigestMismatch",
		},
		"other bytes under the same name, with the pool's spec unchanged, make no revision and reach no node": {
			in: func(p *Pool) Input {
				return Input{Pool: p, Payload: []byte("a, edited"), Nodes: []*corev1.Node{node("n1", workers, "a", true), node("n3", workers, "", false)},
					Rollouts: []*rollout.Rollout{poolRollout(p, "workers-1", 1, "a", rollout.Done, 1, "n1")}}
			},
			cond: Stalled, reason: "DigestMismatch",
			msg: []string{source.ShortDigest(source.Digest([]byte("a, edited"))), source.ShortDigest(source.Digest([]byte("a"))), "revision 1", "spec.digest"},
		},
		"other bytes stay refused after a spec change the controller has already seen": {
			in: func(p *Pool) Input {
				p.Generation, p.Status.ObservedGeneration = 2, 2
				return Input{Pool: p, Payload: []byte("a, edited"), Nodes: []*corev1.Node{node("n1", workers, "a", true)},
					Rollouts: []*rollout.Rollout{poolRollout(p, "workers-1", 1, "a", rollout.Done, 1, "n1")}}
			},
			cond: Stalled, reason: "DigestMismatch",
		},
		"a change of the pool's spec takes the bytes it finds into a new revision": {
			in: func(p *Pool) Input {
				p.Generation, p.Status.ObservedGeneration = 2, 1
				return Input{Pool: p, Payload: []byte("a, edited"), Nodes: []*corev1.Node{node("n1", workers, "a", true), node("n3", workers, "", false)},
					Rollouts: []*rollout.Rollout{poolRollout(p, "workers-1", 1, "a", rollout.Done, 1, "n1")}}
			},
			create: []string{"n1", "n3"}, name: "workers-2",
			cond: Reconciling, reason: "RollingOut", counts: Counts{Selected: 2, Updated: 0, Available: 2},
		},
		"spec.digest set to the new bytes makes a new revision of them": {
			in: func(p *Pool) Input {
				p.Generation, p.Status.ObservedGeneration = 2, 2
				p.Spec.Digest = source.Digest([]byte("a, edited"))
				return Input{Pool: p, Payload: []byte("a, edited"), Nodes: []*corev1.Node{node("n1", workers, "a", true)},
					Rollouts: []*rollout.Rollout{poolRollout(p, "workers-1", 1, "a", rollout.Done, 1, "n1")}}
			},
			create: []string{"n1"}, name: "workers-2",
			cond: Reconciling, reason: "RollingOut", counts: Counts{Selected: 1, Available: 1},
		},
		"a config outside the pool's namespace stalls the pool: no agent could read it": {
			in: func(p *Pool) Input {
				p.Spec.ConfigSource.ConfigMap.Namespace = "default"
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "", false)}}
			},
			cond: Stalled, reason: "ConfigOutsideNamespace",
		},
		"one node's address for many stalls the pool before any node starts": {
			in: func(p *Pool) Input {
				n1, n2 := node("n1", workers, "", false), node("n2", workers, "", false)
				n1.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}
				n2.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.2"}}
				return Input{Pool: p, Payload: []byte("address: 10.0.0.1\nmaxPods: 50\n"), Nodes: []*corev1.Node{n1, n2}}
			},
			cond: Stalled, reason: "NodeSpecificConfig", counts: Counts{Selected: 2, Available: 2},
		},
		"a field a node's kubelet flag sets stalls the pool before any node starts": {
			in: func(p *Pool) Input {
				n1, n2 := node("n1", workers, "", false), node("n2", workers, "", false)
				n1.Annotations = map[string]string{flagz.Annotation: `[{"field":"maxPods","flag":"max-pods","value":"42"}]`}
				n2.Annotations = map[string]string{flagz.Annotation: `[]`}
				return Input{Pool: p, Payload: []byte("maxPods: 50\n"), Nodes: []*corev1.Node{n1, n2}}
			},
			cond: Stalled, reason: "ShadowedByFlags", counts: Counts{Selected: 2, Available: 2},
		},
		"the flag's own value is no change": {
			in: func(p *Pool) Input {
				n1 := node("n1", workers, "", false)
				n1.Annotations = map[string]string{flagz.Annotation: `[{"field":"maxPods","flag":"max-pods","value":"42"}]`}
				return Input{Pool: p, Payload: []byte("maxPods: 42\n"), Nodes: []*corev1.Node{n1}}
			},
			create: []string{"n1"}, name: "workers-1",
			cond: Reconciling, reason: "RollingOut", counts: Counts{Selected: 1, Available: 1},
		},
		"a config that cannot be read stalls the pool": {
			in: func(p *Pool) Input {
				return Input{Pool: p, PayloadErr: errors.New(`configmaps "a" not found`), Nodes: []*corev1.Node{node("n1", workers, "", false)}}
			},
			cond: Stalled, reason: "ConfigUnavailable",
		},
		"a paused pool starts nothing, and pauses its rollout": {
			in: func(p *Pool) Input {
				p.Spec.Paused = true
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "", false)},
					Rollouts: []*rollout.Rollout{poolRollout(p, "workers-1", 1, "a", rollout.Running, 1, "n1")}}
			},
			pause: []string{"workers-1"},
			cond:  Reconciling, reason: "RollingOut", counts: Counts{Selected: 1, Available: 1},
		},
		"an unpaused pool resumes its rollout": {
			in: func(p *Pool) Input {
				r := poolRollout(p, "workers-1", 1, "a", rollout.Paused, 1, "n1")
				r.Spec.Paused = true
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "", false)}, Rollouts: []*rollout.Rollout{r}}
			},
			resume: []string{"workers-1"},
			cond:   Reconciling, reason: "RollingOut", counts: Counts{Selected: 1, Available: 1},
		},
		"a node that another unfinished rollout covers waits for it": {
			in: func(p *Pool) Input {
				manual := rollout.New("kube-system", "by-hand", rollout.Spec{Config: ref("x"), Nodes: []string{"n2"}, MaxUnavailable: intstr.FromInt32(1)})
				return Input{Pool: p, Payload: []byte("a"), Nodes: []*corev1.Node{node("n1", workers, "", false), node("n2", workers, "", false)},
					Foreign: []*rollout.Rollout{manual}}
			},
			create: []string{"n1"}, lists: true, name: "workers-1",
			cond: Reconciling, reason: "RollingOut", counts: Counts{Selected: 2, Available: 2},
		},
		"a config that changes a resource manager policy stalls a pool that does not drain, before any node starts": {
			in: func(p *Pool) Input {
				p.Spec.AllowUnsafe = []string{"resource-managers"}
				return Input{Pool: p, Payload: []byte(staticPayload), Nodes: []*corev1.Node{node("n1", workers, "", false)}}
			},
			planned: true,
			cond:    Stalled, reason: "NeedsDrain", msg: []string{"cpuManagerPolicy", "node/n1", "spec.strategy.drain"},
			counts: Counts{Selected: 1, Available: 1},
		},
		"a change of a class the pool does not allow stalls it": {
			in: func(p *Pool) Input {
				p.Spec.Strategy.Drain = true
				return Input{Pool: p, Payload: []byte(staticPayload), Nodes: []*corev1.Node{node("n1", workers, "", false)}}
			},
			planned: true,
			cond:    Stalled, reason: "NeedsDrain", msg: []string{"resource-managers", "spec.allowUnsafe"},
			counts: Counts{Selected: 1, Available: 1},
		},
		"a pool that drains drains every node it rolls to when one needs it, as rollout start -l does": {
			in: func(p *Pool) Input {
				p.Spec.Strategy.Drain, p.Spec.AllowUnsafe = true, []string{"resource-managers"}
				return Input{Pool: p, Payload: []byte(staticPayload),
					Nodes: []*corev1.Node{node("n1", workers, "old-static", true), node("n2", workers, "old-pods", true), node("n3", workers, "", false)},
					Configs: map[string]*kubeletconfigv1beta1.KubeletConfiguration{
						rollout.ConfigKey(ref("old-static")): {CPUManagerPolicy: "static"},
						rollout.ConfigKey(ref("old-pods")):   {MaxPods: 50},
					}}
			},
			create: []string{"n1", "n2", "n3"}, name: "workers-1", drain: []string{"n1", "n2", "n3"}, planned: true,
			cond: Reconciling, reason: "RollingOut", counts: Counts{Selected: 3, Available: 3},
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := newPool("workers", "a", workers)
			in := tc.in(p)
			in.Now = now
			out := Decide(in)
			var created, drained []string
			if out.Create != nil {
				// The rollout covers the pool's selector; the nodes it
				// rolls to are those that do not hold the revision.
				// (a joining node is assigned outside it). One that leaves
				// nodes out lists the others.
				if rollout.Lists(out.Create) != tc.lists {
					t.Errorf("created rollout lists its nodes: %v, want %v", rollout.Lists(out.Create), tc.lists)
				}
				view, err := rollout.Resolve(out.Create, in.Nodes, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, name := range view.Spec.Nodes {
					i := slices.IndexFunc(in.Nodes, func(n *corev1.Node) bool { return n.Name == name })
					if i < 0 || slices.Contains(out.Join, name) || source.Holds(in.Nodes[i], out.Create.Spec.Config, out.Create.Spec.Pin) {
						continue
					}
					created = append(created, name)
					if slices.Contains(view.Spec.Drain, name) {
						drained = append(drained, name)
					}
				}
				if out.Create.Name != tc.name {
					t.Errorf("created %s, want %s", out.Create.Name, tc.name)
				}
				if got := out.Create.Labels[Label]; got != "workers" {
					t.Errorf("created rollout's pool label %q", got)
				}
				if !out.Create.Spec.Pin.Equal(source.NewPin(&p.Spec.ConfigSource, in.Payload, p.Spec.AllowUnsafe)) {
					t.Errorf("created rollout pins %v, want the payload's digest", out.Create.Spec.Pin)
				}
				if ow := out.Create.OwnerReferences; len(ow) != 1 || ow[0].Kind != Kind || !ptr.Deref(ow[0].Controller, false) {
					t.Errorf("created rollout's owner %+v, want the pool", ow)
				}
			}
			if diff := cmp.Diff(tc.create, created); diff != "" {
				t.Errorf("rollout nodes (-want +got):\n%s", diff)
			}
			if out.Create != nil {
				if diff := cmp.Diff(tc.drain, drained); diff != "" {
					t.Errorf("drained nodes (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(p.Spec.Strategy.Windows, out.Create.Spec.Windows); diff != "" {
					t.Errorf("windows (-pool +rollout):\n%s", diff)
				}
				if diff := cmp.Diff(p.Spec.Strategy.PauseOnAlerts, out.Create.Spec.PauseOnAlerts); diff != "" {
					t.Errorf("pauseOnAlerts (-pool +rollout):\n%s", diff)
				}
			}
			if diff := cmp.Diff(tc.join, out.Join); diff != "" {
				t.Errorf("joining nodes (-want +got):\n%s", diff)
			}
			if out.Join != nil && (!source.Equal(out.JoinTarget, &p.Spec.ConfigSource) || !out.JoinPin.Equal(source.NewPin(&p.Spec.ConfigSource, in.Payload, p.Spec.AllowUnsafe))) {
				t.Errorf("joining nodes get %v pinned %v, want the pool's config pinned to its payload", out.JoinTarget, out.JoinPin)
			}
			if want := tc.planned || tc.create != nil; out.Planned != want {
				t.Errorf("planned %t, want %t", out.Planned, want)
			}
			for what, pair := range map[string][2][]string{"abort": {tc.abort, out.Abort}, "pause": {tc.pause, out.Pause}, "resume": {tc.resume, out.Resume}} {
				if diff := cmp.Diff(pair[0], pair[1]); diff != "" {
					t.Errorf("%s (-want +got):\n%s", what, diff)
				}
			}
			for _, typ := range []string{Ready, Reconciling, Stalled} {
				want := metav1.ConditionFalse
				if typ == tc.cond {
					want = metav1.ConditionTrue
				}
				c := meta.FindStatusCondition(out.Status.Conditions, typ)
				if c == nil || c.Status != want {
					t.Errorf("condition %s = %+v, want %s", typ, c, want)
				}
				if typ == tc.cond && c != nil && c.Reason != tc.reason {
					t.Errorf("condition %s reason %s, want %s (%s)", typ, c.Reason, tc.reason, c.Message)
				}
				for _, m := range tc.msg {
					if typ == tc.cond && c != nil && !strings.Contains(c.Message, m) {
						t.Errorf("condition %s message %q, want it to say %q", typ, c.Message, m)
					}
				}
				if typ == tc.cond && c != nil && !slices.Contains(Reasons[typ], c.Reason) {
					t.Errorf("condition %s reason %s is not in Reasons[%s]", typ, c.Reason, typ)
				}
			}
			if out.Status.ObservedGeneration != p.Generation {
				t.Errorf("observedGeneration %d, want %d", out.Status.ObservedGeneration, p.Generation)
			}
			if diff := cmp.Diff(tc.counts, out.Status.Nodes); diff != "" {
				t.Errorf("counts (-want +got):\n%s", diff)
			}
			if tc.counts.Conflicting > 0 && !strings.Contains(strings.Join(out.Status.ConflictingNodes, ","), "n9") {
				t.Errorf("conflicting nodes %v, want n9", out.Status.ConflictingNodes)
			}
		})
	}
}

func TestUnselected(t *testing.T) {
	workers := newPool("workers", "a", map[string]string{"pool": "workers"})
	broken := newPool("broken", "a", nil)
	broken.Spec.NodeSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "pool", Operator: "Nonsense"}}
	for name, tc := range map[string]struct {
		pools  []*Pool
		labels map[string]string
		want   bool
	}{
		"no pool":                                      {labels: map[string]string{"pool": "workers"}, want: true},
		"a pool selects the node":                      {pools: []*Pool{workers}, labels: map[string]string{"pool": "workers"}, want: false},
		"the pools select other nodes":                 {pools: []*Pool{workers}, labels: map[string]string{"pool": "gpu"}, want: true},
		"a selector that does not parse may select it": {pools: []*Pool{workers, broken}, labels: map[string]string{"pool": "gpu"}, want: false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Unselected(tc.pools, node("n", tc.labels, "", false)); got != tc.want {
				t.Errorf("Unselected = %t, want %t", got, tc.want)
			}
		})
	}
}
