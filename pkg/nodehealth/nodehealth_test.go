package nodehealth

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// node is a Ready node with no pressure, edited by the conditions given.
func node(conds ...corev1.NodeCondition) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	n.Status.Conditions = []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse},
		{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse},
	}
	for _, c := range conds {
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == c.Type {
				n.Status.Conditions[i] = c
			}
		}
	}
	return n
}

// pod is a Running, Ready pod named NS/NAME with uid NAME.
func pod(name string, edits ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name)}}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	for _, e := range edits {
		e(p)
	}
	return p
}

func notReady(p *corev1.Pod) {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady"}}
}

func failed(reason, message string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodFailed
		p.Status.Reason, p.Status.Message = reason, message
		notReady(p)
	}
}

func TestTake(t *testing.T) {
	n := node(corev1.NodeCondition{Type: corev1.NodeDiskPressure, Status: corev1.ConditionTrue})
	deleting := metav1.NewTime(t0)
	pods := []*corev1.Pod{
		pod("web"),
		pod("batch", notReady),
		pod("done", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		pod("pending", func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }),
		pod("going", func(p *corev1.Pod) { p.DeletionTimestamp = &deleting }),
		pod("api"),
	}
	got := Take(n, pods, t0)
	want := Baseline{
		Taken: t0,
		// DiskPressure was True: it is not held to False.
		Clear: []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodePIDPressure},
		Pods: []Pod{
			{Namespace: "default", Name: "api", UID: "api", Ready: true},
			{Namespace: "default", Name: "batch", UID: "batch"},
			{Namespace: "default", Name: "web", UID: "web", Ready: true},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Take (-want +got):\n%s", diff)
	}
	if n := got.ReadyPods(); n != 2 {
		t.Errorf("ReadyPods = %d, want 2", n)
	}
	if n := Running(pods); n != 5 {
		t.Errorf("Running = %d, want 5 (all but the Succeeded pod)", n)
	}
}

func TestJudge(t *testing.T) {
	base := Take(node(), []*corev1.Pod{pod("web"), pod("batch", notReady)}, t0)
	const grace = 50 * time.Second
	observed := func(n *corev1.Node, pods ...*corev1.Pod) Observed {
		return Observed{Node: n, Pods: pods, Now: t0.Add(time.Minute), Grace: grace, LeaseRenewed: t0.Add(55 * time.Second)}
	}
	tests := map[string]struct {
		obs   Observed
		stage Stage
		want  Verdict
	}{
		"all as before": {
			obs: observed(node(), pod("web"), pod("batch", notReady)),
		},
		"a pod that was not Ready need not be Ready": {
			obs: observed(node(), pod("web"), pod("batch", notReady)),
		},
		"gate: a pod that was Ready is not Ready again yet": {
			obs:  observed(node(), pod("web", notReady), pod("batch")),
			want: Verdict{Waiting: "pod default/web was Ready before the restart and is not Ready"},
		},
		"trial: readiness is the pod's own business": {
			obs:   observed(node(), pod("web", notReady), pod("batch")),
			stage: Trial,
		},
		"a pod deleted since is its owner's doing": {
			obs: observed(node(), pod("batch", notReady)),
		},
		"a new pod is not judged": {
			obs: observed(node(), pod("web"), pod("batch", notReady), pod("new", failed("OutOfpods", "Node didn't have enough resource: pods"))),
		},
		"evicted": {
			obs:   observed(node(), pod("web", failed("Evicted", "The node was low on resource: memory.")), pod("batch", notReady)),
			stage: Trial,
			want:  Verdict{Failed: "pod default/web was stopped by the kubelet: Evicted: The node was low on resource: memory."},
		},
		"rejected at re-admission, at the gate": {
			obs:  observed(node(), pod("web", failed("OutOfpods", "Node didn't have enough resource: pods")), pod("batch", notReady)),
			want: Verdict{Failed: "pod default/web was stopped by the kubelet: OutOfpods: Node didn't have enough resource: pods"},
		},
		"stopped and deleted since: the watch saw it": {
			obs: func() Observed {
				o := observed(node(), pod("batch", notReady))
				o.Stopped = map[types.UID]string{"web": "Evicted: The node had condition: [DiskPressure]."}
				return o
			}(),
			stage: Trial,
			want:  Verdict{Failed: "pod default/web was stopped by the kubelet: Evicted: The node had condition: [DiskPressure]."},
		},
		"failure wins over waiting": {
			obs:  observed(node(), pod("web", notReady), pod("batch", failed("", ""))),
			want: Verdict{Failed: "pod default/batch was stopped by the kubelet: phase Failed"},
		},
		"pressure turned True": {
			obs: observed(node(corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue,
				Reason: "KubeletHasInsufficientMemory", Message: "kubelet has insufficient memory available"}), pod("web"), pod("batch", notReady)),
			stage: Trial,
			want:  Verdict{Failed: "node condition MemoryPressure turned True: KubeletHasInsufficientMemory: kubelet has insufficient memory available"},
		},
		"a condition that is not pressure is not held": {
			obs: observed(node(corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue}), pod("web"), pod("batch", notReady)),
		},
		"gate: node not Ready is waited for": {
			obs:  observed(node(corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady"}), pod("web"), pod("batch", notReady)),
			want: Verdict{Waiting: "node Ready is False"},
		},
		"trial: node not Ready fails": {
			obs: observed(node(corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown,
				Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status."}), pod("web"), pod("batch", notReady)),
			stage: Trial,
			want:  Verdict{Failed: "node Ready is Unknown since 0001-01-01T00:00:00Z: NodeStatusUnknown: Kubelet stopped posting node status."},
		},
		"trial: a NotReady of the last seconds is waited out": {
			obs: observed(node(corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady",
				Message: "PLEG is not healthy: pleg has yet to be successful", LastTransitionTime: metav1.NewTime(t0.Add(time.Minute - NotReadyGrace + time.Second))}),
				pod("web"), pod("batch", notReady)),
			stage: Trial,
		},
		"trial: a NotReady of NotReadyGrace fails": {
			obs: observed(node(corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady",
				LastTransitionTime: metav1.NewTime(t0.Add(time.Minute - NotReadyGrace))}), pod("web"), pod("batch", notReady)),
			stage: Trial,
			want:  Verdict{Failed: "node Ready is False since 2026-11-25T12:00:30Z: KubeletNotReady"},
		},
		"trial: lease not renewed within the grace period": {
			obs: func() Observed {
				o := observed(node(), pod("web"), pod("batch", notReady))
				o.LeaseRenewed = o.Now.Add(-grace)
				return o
			}(),
			stage: Trial,
			want:  Verdict{Failed: "node lease last renewed 50s ago, at or beyond the node monitor grace period 50s"},
		},
		"gate: the lease is the prober's": {
			obs: func() Observed {
				o := observed(node(), pod("web"), pod("batch", notReady))
				o.LeaseRenewed = o.Now.Add(-time.Hour)
				return o
			}(),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Judge(base, tc.obs, tc.stage); got != tc.want {
				t.Errorf("Judge = %+v, want %+v", got, tc.want)
			}
		})
	}

	t.Run("a kubelet that resets readiness", func(t *testing.T) {
		restarted := t0.Add(30 * time.Second)
		probed := func(p *corev1.Pod) {
			p.Spec.Containers = []corev1.Container{{Name: "c", ReadinessProbe: &corev1.Probe{PeriodSeconds: 10, TimeoutSeconds: 1}}}
		}
		readySince := func(at time.Time) func(*corev1.Pod) {
			return func(p *corev1.Pod) { p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(at) }
		}
		base := Take(node(), []*corev1.Pod{pod("web", probed, readySince(t0)), pod("plain", readySince(t0))}, t0)
		kubelet := func(v string) *corev1.Node {
			n := node()
			n.Status.NodeInfo.KubeletVersion = v
			return n
		}
		for name, tc := range map[string]struct {
			node    *corev1.Node
			web     *corev1.Pod
			up, now time.Time
			want    Verdict
		}{
			"1.33: a probed pod not probed since the restart is waited for": {
				node: kubelet("v1.33.13"), web: pod("web", probed, readySince(t0)), now: restarted.Add(time.Second),
				want: Verdict{Waiting: "pod default/web: the restarted kubelet v1.33.13 has not probed its readiness yet (up to 11s after it is up)"},
			},
			"1.33: once its readiness changed since the restart": {
				node: kubelet("v1.33.13"), web: pod("web", probed, readySince(restarted.Add(3*time.Second))), now: restarted.Add(4 * time.Second),
			},
			"1.33: once a period and a timeout passed": {
				node: kubelet("v1.33.13"), web: pod("web", probed, readySince(t0)), now: restarted.Add(11 * time.Second),
			},
			"1.34: a kubelet slow to come up is given a period and a timeout from when it is up": {
				node: kubelet("v1.34.12"), web: pod("web", probed, readySince(t0)), up: restarted.Add(5 * time.Second), now: restarted.Add(12 * time.Second),
				want: Verdict{Waiting: "pod default/web: the restarted kubelet v1.34.12 has not probed its readiness yet (up to 11s after it is up)"},
			},
			"1.34: and passes once they passed": {
				node: kubelet("v1.34.12"), web: pod("web", probed, readySince(t0)), up: restarted.Add(5 * time.Second), now: restarted.Add(16 * time.Second),
			},
			"an unreadable version counts as a kubelet that resets": {
				node: kubelet(""), web: pod("web", probed, readySince(t0)), now: restarted.Add(time.Second),
				want: Verdict{Waiting: "pod default/web: the restarted kubelet has not probed its readiness yet (up to 11s after it is up)"},
			},
			"1.36 keeps readiness": {
				node: kubelet("v1.36.3"), web: pod("web", probed, readySince(t0)), now: restarted.Add(time.Second),
			},
		} {
			t.Run(name, func(t *testing.T) {
				o := Observed{Node: tc.node, Pods: []*corev1.Pod{tc.web, pod("plain", readySince(t0))}, Restarted: restarted, Up: tc.up, Now: tc.now}
				if got := Judge(base, o, Gate); got != tc.want {
					t.Errorf("Judge = %+v, want %+v", got, tc.want)
				}
			})
		}
	})

	t.Run("at most three findings are named", func(t *testing.T) {
		var pods, now []*corev1.Pod
		for _, name := range []string{"a", "b", "c", "d", "e"} {
			pods = append(pods, pod(name))
			now = append(now, pod(name, notReady))
		}
		got := Judge(Take(node(), pods, t0), Observed{Node: node(), Pods: now}, Gate)
		want := "pod default/a was Ready before the restart and is not Ready; pod default/b was Ready before the restart and is not Ready; " +
			"pod default/c was Ready before the restart and is not Ready; and 2 more"
		if got.Waiting != want {
			t.Errorf("Waiting = %q, want %q", got.Waiting, want)
		}
	})
}

func TestResetsReadiness(t *testing.T) {
	tests := map[string]struct {
		version string
		want    bool
	}{
		"1.34":             {"v1.34.12", true},
		"1.31":             {"v1.31.0", true},
		"1.35":             {"v1.35.0", false},
		"1.37 with suffix": {"v1.37.2-eks-1234", false},
		"unknown":          {"", true},
		"garbage":          {"kubelet", true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			node := &corev1.Node{Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: tc.version}}}
			if got := ResetsReadiness(node); got != tc.want {
				t.Errorf("ResetsReadiness(kubelet %q) = %v, want %v", tc.version, got, tc.want)
			}
		})
	}
}
