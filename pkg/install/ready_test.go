package install

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dkc/dkc/pkg/controller"
)

// TestObserve: install is done once the controller's Deployment has rolled
// out and its leader is a Ready pod at the applied images, and every node
// has a Ready agent pod at the applied images.
func TestObserve(t *testing.T) {
	objs, err := Render(Options{ImageRepository: "r.test/dkc", Version: "v2", Agent: AgentDaemonSet})
	if err != nil {
		t.Fatal(err)
	}
	w, err := FindWorkloads(objs)
	if err != nil {
		t.Fatal(err)
	}
	if w.Agent == nil {
		t.Fatal("no DaemonSet rendered")
	}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	const (
		agentV2      = "r.test/dkc/kubectl-dkc-agent:v2"
		agentV1      = "r.test/dkc/kubectl-dkc-agent:v1"
		controllerV2 = "r.test/dkc/kubectl-dkc-controller:v2"
		controllerV1 = "r.test/dkc/kubectl-dkc-controller:v1"
	)
	pod := func(name, node, container, image string, ready bool) *corev1.Pod {
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		labels := w.Controller.Spec.Template.Labels
		if container == "agent" {
			labels = w.Agent.Spec.Template.Labels
		}
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Labels: labels},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: container, Image: image}}},
			Status:     corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
		}
	}
	node := func(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	lease := func(holder string, renewed time.Time) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: controller.LeaseName, Namespace: "kube-system"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15),
				RenewTime: &metav1.MicroTime{Time: renewed}},
		}
	}
	deployment := func(updated, available int32) *appsv1.Deployment {
		d := w.Controller.DeepCopy()
		d.Generation = 2
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: updated, AvailableReplicas: available}
		return d
	}
	daemonSet := func(desired, updated, available int32) *appsv1.DaemonSet {
		ds := w.Agent.DeepCopy()
		ds.Generation = 3
		ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: 3, DesiredNumberScheduled: desired, UpdatedNumberScheduled: updated, NumberAvailable: available}
		return ds
	}
	done := []runtime.Object{
		deployment(2, 2), daemonSet(2, 2, 2), lease("c-1", now.Add(-5*time.Second)),
		pod("c-1", "n1", "controller", controllerV2, true), pod("c-2", "n2", "controller", controllerV2, true),
		pod("a-1", "n1", "agent", agentV2, true), pod("a-2", "n2", "agent", agentV2, true),
		node("n1"), node("n2"),
	}
	// with is done with objs in place of those of the same kind and name.
	with := func(objs ...runtime.Object) []runtime.Object {
		key := func(o runtime.Object) string {
			m := o.(metav1.Object)
			return fmt.Sprintf("%T %s/%s", o, m.GetNamespace(), m.GetName())
		}
		replaced := map[string]runtime.Object{}
		for _, o := range objs {
			replaced[key(o)] = o
		}
		var out []runtime.Object
		for _, o := range done {
			if r, ok := replaced[key(o)]; ok {
				out = append(out, r)
				delete(replaced, key(o))
				continue
			}
			out = append(out, o)
		}
		for _, o := range objs {
			if _, ok := replaced[key(o)]; ok {
				out = append(out, o)
			}
		}
		return out
	}
	tests := map[string]struct {
		objs     []runtime.Object
		wantDone bool
		want     string
	}{
		"done": {
			objs: done, wantDone: true,
			want: "controller: leader c-1; agents: 2 of 2 nodes Ready",
		},
		"the leader runs the old image": {
			objs: with(pod("c-1", "n1", "controller", controllerV1, true)),
			want: "controller: no leader yet; agents: 2 of 2 nodes Ready",
		},
		"the lease expired": {
			objs: with(lease("c-1", now.Add(-time.Minute))),
			want: "controller: no leader yet; agents: 2 of 2 nodes Ready",
		},
		"the deployment rolls out": {
			objs: with(deployment(1, 1)),
			want: "controller: 1 of 2 new replicas updated; agents: 2 of 2 nodes Ready",
		},
		"an agent runs the old image": {
			objs: with(pod("a-2", "n2", "agent", agentV1, true), daemonSet(2, 1, 2)),
			want: "controller: leader c-1; agents: 1 of 2 nodes Ready (waiting for n2), 1 of 2 pods updated",
		},
		"an agent is not Ready": {
			objs: with(pod("a-2", "n2", "agent", agentV2, false), daemonSet(2, 2, 1)),
			want: "controller: leader c-1; agents: 1 of 2 nodes Ready (waiting for n2), 1 of 2 updated pods available",
		},
		"a node without an agent": {
			objs: with(node("n3")),
			want: "controller: leader c-1; agents: 2 of 3 nodes Ready (waiting for n3)",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset(tc.objs...)
			r, err := Observe(context.Background(), client, w, now)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, r.String()); diff != "" {
				t.Errorf("String() (-want +got):\n%s", diff)
			}
			if r.Done() != tc.wantDone {
				t.Errorf("Done() = %v, want %v", r.Done(), tc.wantDone)
			}
		})
	}
}
