package controller

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

func TestNeedsDriver(t *testing.T) {
	for name, tc := range map[string]struct {
		status  rollout.State
		paused  bool
		aborted bool
		want    bool
	}{
		"a new rollout, which no driver looked at":      {status: "", want: true},
		"a running rollout":                             {status: rollout.Running, want: true},
		"a paused rollout, paused in its spec":          {status: rollout.Paused, paused: true, want: false},
		"a paused rollout resumed in its spec":          {status: rollout.Paused, want: true},
		"a running rollout paused in its spec":          {status: rollout.Running, paused: true, want: true},
		"a halted rollout":                              {status: rollout.Halted, want: false},
		"a halted rollout aborted in its spec":          {status: rollout.Halted, aborted: true, want: true},
		"an aborted rollout":                            {status: rollout.Aborted, aborted: true, want: false},
		"a done rollout, even if aborted after the end": {status: rollout.Done, aborted: true, want: false},
	} {
		t.Run(name, func(t *testing.T) {
			r := rollout.New("kube-system", "r", rollout.Spec{Paused: tc.paused, Aborted: tc.aborted})
			r.Status.State = tc.status
			if got := NeedsDriver(r); got != tc.want {
				t.Errorf("NeedsDriver = %v, want %v (state %s)", got, tc.want, r.State())
			}
		})
	}
}

func TestLeader(t *testing.T) {
	now := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	lease := func(holder string, renewed time.Duration) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: LeaseName},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(holder),
				LeaseDurationSeconds: ptr.To[int32](15),
				RenewTime:            &metav1.MicroTime{Time: now.Add(-renewed)},
			},
		}
	}
	for name, tc := range map[string]struct {
		lease *coordinationv1.Lease
		want  string
	}{
		"no lease: no controller ever ran":       {want: ""},
		"renewed within its duration: it leads":  {lease: lease("replica-1", 5*time.Second), want: "replica-1"},
		"not renewed for longer: nobody leads":   {lease: lease("replica-1", 16*time.Second), want: ""},
		"released on a clean stop: nobody leads": {lease: lease("", time.Second), want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset()
			if tc.lease != nil {
				client = fake.NewClientset(tc.lease)
			}
			got, err := Leader(context.Background(), client, "kube-system", now)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Leader = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNodeChanged(t *testing.T) {
	base := func() *corev1.Node {
		return &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: source.StartupTaint, Effect: corev1.TaintEffectNoSchedule}}}}
	}
	for name, tc := range map[string]struct {
		edit func(n *corev1.Node)
		want bool
	}{
		"a heartbeat":                         {edit: func(n *corev1.Node) { n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure}} }},
		"the startup taint removed":           {edit: func(n *corev1.Node) { n.Spec.Taints = nil }, want: true},
		"a label":                             {edit: func(n *corev1.Node) { n.Labels = map[string]string{"pool": "a"} }, want: true},
		"another taint, the startup one kept": {edit: func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "x"}) }},
	} {
		t.Run(name, func(t *testing.T) {
			cur := base()
			tc.edit(cur)
			if got := nodeChanged(base(), cur); got != tc.want {
				t.Errorf("nodeChanged = %t, want %t", got, tc.want)
			}
		})
	}
}
