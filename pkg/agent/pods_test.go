package agent

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
	"github.com/kubectl-dkc/dkc/pkg/nodehealth"
)

// runningPod is a Running pod default/NAME, Ready or not.
func runningPod(name string, ready bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)}}
	p.Status.Phase = corev1.PodRunning
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	return p
}

// evictedPod is default/NAME stopped by the kubelet's eviction manager.
func evictedPod(name string) *corev1.Pod {
	p := runningPod(name, false)
	p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
	return p
}

// syncStepping is e.sync while the fake clock steps on whenever the agent
// waits on it (the gate's waits), and how far it stepped.
func (e *env) syncStepping(t *testing.T) (time.Duration, time.Duration) {
	t.Helper()
	type result struct {
		requeue time.Duration
		err     error
	}
	done := make(chan result, 1)
	node := e.node(t)
	go func() {
		requeue, err := e.a.sync(context.Background(), node, e.getter)
		done <- result{requeue, err}
	}()
	start := e.clk.Now()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatalf("sync: %v", r.err)
			}
			return r.requeue, e.clk.Since(start)
		case <-deadline:
			t.Fatal("sync did not return")
		case <-time.After(time.Millisecond):
			if e.clk.HasWaiters() {
				e.clk.Step(podGateInterval)
			}
		}
	}
}

// The gate waits for the pods that were Ready before the restart, as
// kubelets up to 1.34 make them not Ready for a moment, and passes once they
// are Ready again.
func TestGateWaitsForPodsReadyAgain(t *testing.T) {
	e := newEnv(t)
	e.configMap(t, "a", cfgA, nil)
	e.assign(t, "a")
	// List 1 is the baseline; lists 2-4 (the gate's first looks) show web
	// not Ready, as a restarted 1.33 kubelet shows it until its probe.
	e.pods.onList = func(n int) []*corev1.Pod {
		return []*corev1.Pod{runningPod("web", n == 1 || n > 4), runningPod("batch", false)}
	}

	_, waited := e.syncStepping(t)

	diff(t, "condition", "True Trial", e.condition(t))
	diff(t, "restarter calls", []string{"Restart"}, e.restart.CallsSnapshot())
	diff(t, "pod lists (baseline, then the gate's looks)", 5, e.pods.lists)
	diff(t, "gate's wait", 3*podGateInterval, waited)
	diff(t, "baseline recorded for the trial", 1, e.stored(t).Baseline.ReadyPods())
}

func TestGateRollsBackWhenPodsDoNotRecover(t *testing.T) {
	e := newEnv(t)
	e.a.PodReadyTimeout = 10 * time.Second
	e.configMap(t, "a", cfgA, nil)
	e.assign(t, "a")
	e.pods.onList = func(n int) []*corev1.Pod {
		return []*corev1.Pod{runningPod("web", n == 1)}
	}

	_, waited := e.syncStepping(t)

	diff(t, "condition", "False RolledBack", e.condition(t))
	diff(t, "restarter calls (apply, rollback)", []string{"Restart", "Restart"}, e.restart.CallsSnapshot())
	diff(t, "kubelet config", local, string(e.writer.Current))
	if waited < e.a.PodReadyTimeout {
		t.Errorf("gate gave up after %s, before its timeout %s", waited, e.a.PodReadyTimeout)
	}
	want := "health gate: after 10s: pod default/web was Ready before the restart and is not Ready"
	if got := e.status(t).Error; !strings.Contains(got, want) {
		t.Errorf("status error %q does not contain %q", got, want)
	}
	if ev := e.events(); len(ev) == 0 || ev[len(ev)-1] != "Warning RolledBack" {
		t.Errorf("events %v do not end with Warning RolledBack", ev)
	}
}

// A pod the restarted kubelet stops (evicted, or rejected when it admits
// the node's pods again) fails the gate at once: no wait for readiness.
func TestGateRollsBackOnStoppedPod(t *testing.T) {
	e := newEnv(t)
	e.configMap(t, "a", cfgA, nil)
	e.assign(t, "a")
	e.pods.onList = func(n int) []*corev1.Pod {
		if n == 1 {
			return []*corev1.Pod{runningPod("web", true)}
		}
		return []*corev1.Pod{evictedPod("web")}
	}

	_, waited := e.syncStepping(t)

	diff(t, "condition", "False RolledBack", e.condition(t))
	diff(t, "gate's wait", time.Duration(0), waited)
	want := "health gate: pod default/web was stopped by the kubelet: Evicted: The node was low on resource: memory."
	if got := e.status(t).Error; !strings.Contains(got, want) {
		t.Errorf("status error %q does not contain %q", got, want)
	}
}

// After the gate, the trial holds the node to its baseline until promotion,
// also across an agent restart: the baseline is in the record.
func TestTrialRollsBack(t *testing.T) {
	tests := map[string]struct {
		// during changes the world during the trial.
		during func(t *testing.T, e *env)
		want   string
	}{
		"pod evicted": {
			during: func(t *testing.T, e *env) { e.pods.list = []*corev1.Pod{evictedPod("web")} },
			want:   "trial: pod default/web was stopped by the kubelet: Evicted: The node was low on resource: memory.",
		},
		"pod stopped and deleted": {
			during: func(t *testing.T, e *env) {
				e.pods.list = nil
				e.pods.stopped = map[types.UID]string{"uid-web": "OutOfpods: Node didn't have enough resource: pods"}
			},
			want: "trial: pod default/web was stopped by the kubelet: OutOfpods: Node didn't have enough resource: pods",
		},
		"memory pressure": {
			during: func(t *testing.T, e *env) {
				e.setNodeCondition(t, corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue, Reason: "KubeletHasInsufficientMemory"})
			},
			want: "trial: node condition MemoryPressure turned True: KubeletHasInsufficientMemory",
		},
		"node not Ready": {
			during: func(t *testing.T, e *env) {
				e.setNodeCondition(t, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown",
					LastTransitionTime: metav1.NewTime(e.clk.Now().Add(-nodehealth.NotReadyGrace))})
			},
			want: "trial: node Ready is Unknown since ",
		},
		"lease not renewed": {
			during: func(t *testing.T, e *env) {
				renewed := metav1.NewMicroTime(e.clk.Now().Add(-time.Minute))
				_, err := e.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(context.Background(),
					&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: nodeName}, Spec: coordinationv1.LeaseSpec{RenewTime: &renewed}}, metav1.CreateOptions{})
				must(t, err)
			},
			want: "trial: node lease last renewed 1m10s ago, at or beyond the node monitor grace period 50s",
		},
	}
	for name, tc := range tests {
		for _, restartAgent := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "", true: " after an agent restart"}[restartAgent], func(t *testing.T) {
				e := newEnv(t)
				e.setNodeCondition(t, corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse})
				e.pods.list = []*corev1.Pod{runningPod("web", true)}
				e.configMap(t, "a", cfgA, nil)
				e.assign(t, "a")
				e.sync(t)
				diff(t, "condition", "True Trial", e.condition(t))
				e.clk.Step(trialCheckInterval)
				diff(t, "requeue of a trial check that passes", trialCheckInterval, e.sync(t))

				if restartAgent {
					e.a = e.newAgent()
				}
				tc.during(t, e)
				e.clk.Step(trialCheckInterval)
				e.sync(t)

				diff(t, "condition", "False RolledBack", e.condition(t))
				diff(t, "kubelet config", local, string(e.writer.Current))
				if got := e.status(t).Error; !strings.Contains(got, tc.want) {
					t.Errorf("status error %q does not contain %q", got, tc.want)
				}
				if e.stored(t).Baseline != nil {
					t.Error("the record keeps a baseline after the rollback")
				}
			})
		}
	}
}

// newTrialEnv is an env whose node runs config a in its trial, with one
// Ready pod.
func newTrialEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	e.pods.list = []*corev1.Pod{runningPod("web", true)}
	e.configMap(t, "a", cfgA, nil)
	e.assign(t, "a")
	e.sync(t)
	return e
}

// A trial check reads the node's Lease, on every node in trial, from the
// apiserver's watch cache (resourceVersion 0), not with a quorum read from
// etcd. Staleness of the cache does not matter against a grace period of
// tens of seconds.
func TestTrialReadsTheLeaseFromTheApiserversCache(t *testing.T) {
	e := newTrialEnv(t)
	e.clk.Step(trialCheckInterval)
	e.sync(t)

	gets := 0
	for _, action := range e.client.Actions() {
		get, ok := action.(k8stesting.GetActionImpl)
		if !ok || action.GetResource().Resource != "leases" {
			continue
		}
		gets++
		if rv := get.GetOptions.ResourceVersion; rv != "0" {
			t.Errorf("GET of the node's Lease with resourceVersion %q, want \"0\" (the watch cache)", rv)
		}
	}
	if gets == 0 {
		t.Error("the trial check read no Lease")
	}
}

// A Lease renewed at R cannot be stale before R plus the grace period:
// trial checks read it again only from a check interval before that, so a
// fleet in trial reads its Leases a quarter as often, and a kubelet that
// stopped renewing is still caught at the first check past the grace.
func TestTrialReadsTheLeaseOnlyWhenItCouldBeStale(t *testing.T) {
	e := newTrialEnv(t)
	renewed := metav1.NewMicroTime(e.clk.Now())
	_, err := e.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(context.Background(),
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: nodeName}, Spec: coordinationv1.LeaseSpec{RenewTime: &renewed}}, metav1.CreateOptions{})
	must(t, err)
	leaseGets := func() int {
		n := 0
		for _, action := range e.client.Actions() {
			if action.GetVerb() == "get" && action.GetResource().Resource == "leases" {
				n++
			}
		}
		return n
	}
	grace := kubeletconfig.DefaultNodeMonitorGracePeriod
	before := leaseGets()
	// The kubelet renews no more: the Lease stays at renewed.
	for _, step := range []struct {
		at       time.Duration // since renewed
		wantGets int
	}{
		{trialCheckInterval, 1},
		{2 * trialCheckInterval, 0},
		{grace - trialCheckInterval, 1},
	} {
		e.clk.SetTime(renewed.Add(step.at))
		e.sync(t)
		if got := leaseGets() - before; got != step.wantGets {
			t.Errorf("trial check %s after the renewal: %d reads of the Lease, want %d", step.at, got, step.wantGets)
		}
		before = leaseGets()
		diff(t, "condition", "True Trial", e.condition(t))
	}
	e.clk.SetTime(renewed.Add(grace))
	e.sync(t)
	diff(t, "condition once the Lease is as old as the grace period", "False RolledBack", e.condition(t))
	if got, want := e.status(t).Error, "trial: node lease last renewed 50s ago"; !strings.Contains(got, want) {
		t.Errorf("status error %q does not contain %q", got, want)
	}
}

// Promotion ends the checks: the baseline goes with the trial.
func TestPromotionEndsTrialChecks(t *testing.T) {
	e := newTrialEnv(t)
	e.clk.Step(trial)
	diff(t, "requeue after promotion", time.Duration(0), e.sync(t))
	if e.stored(t).Baseline != nil {
		t.Error("the record keeps a baseline after promotion")
	}
	e.pods.list = []*corev1.Pod{evictedPod("web")}
	e.sync(t)
	diff(t, "condition after promotion", "True Applied", e.condition(t))
}

// Without the node's pods the gate cannot hold them to anything: the agent
// says so and leaves the kubelet alone until it can list them.
func TestPodsNotListable(t *testing.T) {
	e := newEnv(t)
	e.pods.err = &listError{err: apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New(`User "system:serviceaccount:kube-system:dkc-agent" cannot list resource "pods"`))}
	e.configMap(t, "a", cfgA, nil)
	e.assign(t, "a")

	_, err := e.a.sync(context.Background(), e.node(t), e.getter)

	if err == nil {
		t.Fatal("sync succeeded without the node's pods")
	}
	diff(t, "restarter calls", []string(nil), e.restart.CallsSnapshot())
	diff(t, "kubelet config", local, string(e.writer.Current))
	diff(t, "condition", "False Failed", e.condition(t))
	if got, want := e.status(t).Error, "the agent needs list and watch on pods"; !strings.Contains(got, want) {
		t.Errorf("status error %q does not contain %q", got, want)
	}

	// Until the first list, nothing happens and nothing is reported.
	e.pods.err = errNotSynced
	if _, err := e.a.sync(context.Background(), e.node(t), e.getter); err != nil {
		t.Fatalf("sync before the pods are listed: %v", err)
	}
	diff(t, "restarter calls", []string(nil), e.restart.CallsSnapshot())

	e.pods.err = nil
	e.sync(t)
	diff(t, "condition once listed", "True Trial", e.condition(t))
}

// maxPods below what the node runs now is refused before any restart: the
// restarted kubelet would reject the pods beyond it.
func TestMaxPodsBelowRunningPodsRefused(t *testing.T) {
	e := newEnv(t)
	for i := range 43 {
		e.pods.list = append(e.pods.list, runningPod("p"+string(rune('a'+i%26))+string(rune('a'+i/26)), true))
	}
	e.configMap(t, "a", cfgA, nil) // maxPods 42
	e.assign(t, "a")
	e.sync(t)

	diff(t, "restarter calls", []string(nil), e.restart.CallsSnapshot())
	diff(t, "condition", "False Refused", e.condition(t))
	if got, want := e.status(t).Error, "the node runs 43 pods now"; !strings.Contains(got, want) {
		t.Errorf("status error %q does not contain %q", got, want)
	}
}

// setNodeCondition sets (or adds) condition c on the env's Node.
func (e *env) setNodeCondition(t *testing.T, c corev1.NodeCondition) {
	t.Helper()
	n := e.node(t)
	found := false
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == c.Type {
			n.Status.Conditions[i], found = c, true
		}
	}
	if !found {
		n.Status.Conditions = append(n.Status.Conditions, c)
	}
	_, err := e.client.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{})
	must(t, err)
}

// An eviction threshold that the node crosses right now is refused before
// any restart: the restarted kubelet would evict at once.
func TestThresholdCrossedNowRefused(t *testing.T) {
	e := newEnv(t)
	e.a.Signals = func() map[string]kubeletconfig.Signal {
		return map[string]kubeletconfig.Signal{"nodefs.available": {Available: resource.MustParse("30Gi"), Capacity: resource.MustParse("100Gi")}}
	}
	e.configMap(t, "a", `{`+header+`,"maxPods":42,"evictionHard":{"nodefs.available":"40%"}}`, nil)
	e.assign(t, "a")
	e.sync(t)

	diff(t, "restarter calls", []string(nil), e.restart.CallsSnapshot())
	diff(t, "condition", "False Refused", e.condition(t))
	want := `evictionHard["nodefs.available"] 40% (the node has 30Gi of 100Gi available now: it would evict at once)`
	if got := e.status(t).Error; !strings.Contains(got, want) {
		t.Errorf("status error %q does not contain %q", got, want)
	}
}

// An agent restarted during a trial verifies the kubelet's health, and does
// not then judge the trial on the Node as its sync began: that copy may show
// the NotReady of the kubelet's restart, which the verification waited out.
func TestVerifiedSyncDoesNotJudgeItsStaleNode(t *testing.T) {
	e := newEnv(t)
	e.configMap(t, "a", cfgA, nil)
	e.assign(t, "a")
	e.sync(t)
	e.setNodeCondition(t, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: "PLEG is not healthy: pleg has yet to be successful"})
	stale := e.node(t)
	e.setNodeCondition(t, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"})

	e.a = e.newAgent()
	must(t, e.a.startup(context.Background()))
	if _, err := e.a.sync(context.Background(), stale, e.getter); err != nil {
		t.Fatalf("sync: %v", err)
	}

	diff(t, "condition", "True Trial", e.condition(t))
	diff(t, "probes (the apply's, the verification's)", 2, len(e.prober.Expectations))
}

// gateNodeGets counts the GETs of the Node after the kubelet's first
// restart and before a second one (the gate's, not the test's own reads)
// while *on; with fail, each of them fails, as when the apiserver is away.
func (e *env) gateNodeGets(fail bool, on *atomic.Bool) *atomic.Int32 {
	var n atomic.Int32
	e.client.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if !on.Load() || len(e.restart.CallsSnapshot()) != 1 {
			return false, nil, nil
		}
		n.Add(1)
		if fail {
			return true, nil, apierrors.NewServiceUnavailable("apiserver away")
		}
		return false, nil, nil
	})
	return &n
}

// withNodeInformer gives the agent the view of the Node that Run's informer
// gives it: the Node as it is now, not updated again.
func (e *env) withNodeInformer(t *testing.T) {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := indexer.Add(e.node(t)); err != nil {
		t.Fatal(err)
	}
	e.a.nodes = corelisters.NewNodeLister(indexer)
}

// syncGateTimingOut runs a sync whose gate waits for a pod that stays not
// Ready until PodReadyTimeout, with the Node from an informer's view, and
// returns the gate's GETs of the Node; with fail, they fail.
func syncGateTimingOut(t *testing.T, fail bool) (*env, int32) {
	t.Helper()
	e := newEnv(t)
	e.a.PodReadyTimeout = 10 * time.Second
	e.withNodeInformer(t)
	e.configMap(t, "a", cfgA, nil)
	e.assign(t, "a")
	e.pods.onList = func(n int) []*corev1.Pod {
		return []*corev1.Pod{runningPod("web", n == 1)}
	}
	var on atomic.Bool
	on.Store(true)
	gets := e.gateNodeGets(fail, &on)
	e.syncStepping(t)
	on.Store(false)
	return e, gets.Load()
}

// The gate reads the Node from the agent's informer while it waits, with
// no request; its last look, whose verdict rolls back, reads it from the
// apiserver.
func TestGateReadsTheNodeFromTheInformerUntilItsLastLook(t *testing.T) {
	e, gets := syncGateTimingOut(t, false)

	diff(t, "condition", "False RolledBack", e.condition(t))
	diff(t, "the gate's GETs of the Node (its last look)", int32(1), gets)
}

// An apiserver away at the gate's last look does not roll back: the
// informer's view may have stood still since it went away.
func TestGatePassesWhenTheApiserverIsAwayAtItsLastLook(t *testing.T) {
	e, gets := syncGateTimingOut(t, true)

	diff(t, "condition", "True Trial", e.condition(t))
	diff(t, "restarter calls (the apply only)", []string{"Restart"}, e.restart.CallsSnapshot())
	diff(t, "the gate's GETs of the Node (its last look)", int32(1), gets)
}
