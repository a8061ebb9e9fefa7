package install

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

func TestCleanPatches(t *testing.T) {
	tests := map[string]struct {
		node                 corev1.Node
		wantMeta, wantStatus string
	}{
		"nothing of dkc": {
			node: corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"other.io/x": "1"}, Labels: map[string]string{"kubernetes.io/hostname": "n"}},
				Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady}}},
			},
		},
		"annotations, a label and the condition": {
			node: corev1.Node{
				ObjectMeta: metav1.ObjectMeta{
					Annotations: map[string]string{"kubectl-dkc.io/config-source": "{}", "kubectl-dkc.io/config-pin": "{}", "other.io/x": "1"},
					Labels:      map[string]string{"kubectl-dkc.io/x": "y", "kubernetes.io/hostname": "n"},
				},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady}, {Type: "KubeletConfigOK"}}},
			},
			wantMeta:   `{"metadata":{"annotations":{"kubectl-dkc.io/config-pin":null,"kubectl-dkc.io/config-source":null},"labels":{"kubectl-dkc.io/x":null}}}`,
			wantStatus: `{"status":{"conditions":[{"$patch":"delete","type":"KubeletConfigOK"}]}}`,
		},
		"the condition only": {
			node:       corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: "KubeletConfigOK"}}}},
			wantStatus: `{"status":{"conditions":[{"$patch":"delete","type":"KubeletConfigOK"}]}}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			meta, status := CleanPatches(&tc.node)
			if diff := cmp.Diff(tc.wantMeta, string(meta)); diff != "" {
				t.Errorf("metadata patch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantStatus, string(status)); diff != "" {
				t.Errorf("status patch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBlockersErr(t *testing.T) {
	tests := map[string]struct {
		b          Blockers
		resetNodes bool
		want       string
	}{
		"nothing":                            {},
		"assigned nodes, with --reset-nodes": {b: Blockers{Assigned: []string{"n1"}}, resetNodes: true},
		"assigned nodes": {
			b:    Blockers{Assigned: []string{"n1", "n2"}},
			want: "uninstall refused: nodes hold an assignment (n1, n2): add --reset-nodes to send them back to their local config first, a few at a time",
		},
		"a rollout and a pool, with --reset-nodes": {
			b:          Blockers{Rollouts: []string{"kube-system/r1"}, Pools: []string{"kube-system/p1"}},
			resetNodes: true,
			want: "uninstall refused: rollouts exist (kube-system/r1): delete them with kubectl delete nodeconfigrollouts -A --all once you no longer need their history; " +
				"pools exist (kube-system/p1): delete them with kubectl delete nodeconfigpools -A --all; their nodes keep their config until reset",
		},
		"a reset under way": {
			b:    Blockers{NotLocal: []string{"n1"}},
			want: "uninstall refused: nodes have not gone back to their local config yet (n1): wait with kubectl dkc status --wait-for=active",
		},
		"many nodes": {
			b:    Blockers{Assigned: []string{"a", "b", "c", "d", "e", "f", "g"}},
			want: "uninstall refused: nodes hold an assignment (a, b, c, d, e and 2 more): add --reset-nodes to send them back to their local config first, a few at a time",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got string
			if err := tc.b.Err(tc.resetNodes); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Err(%v) = %q, want %q", tc.resetNodes, got, tc.want)
			}
		})
	}
}

// TestCleanNodesRemovesTheStartupTaint: once dkc is gone nothing would take
// its startup taint off a node, so uninstall does; other taints stay, and a
// node with nothing of dkc's is left alone.
func TestCleanNodesRemovesTheStartupTaint(t *testing.T) {
	other := corev1.Taint{Key: "example.com/gpu", Effect: corev1.TaintEffectNoSchedule}
	client := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "joined"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: source.StartupTaint, Effect: corev1.TaintEffectNoSchedule}, other,
		}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{other}}},
	)
	ctx := context.Background()
	cleaned, err := CleanNodes(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"joined"}, cleaned); diff != "" {
		t.Errorf("cleaned (-want +got):\n%s", diff)
	}
	for _, name := range []string{"joined", "plain"} {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]corev1.Taint{other}, n.Spec.Taints); diff != "" {
			t.Errorf("node %s taints (-want +got):\n%s", name, diff)
		}
	}
}
