package source_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

func TestRemoveStartupTaint(t *testing.T) {
	startup := corev1.Taint{Key: source.StartupTaint, Effect: corev1.TaintEffectNoSchedule}
	other := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	for name, tc := range map[string]struct {
		taints  []corev1.Taint
		want    []corev1.Taint
		patches int
	}{
		"the startup taint alone":          {taints: []corev1.Taint{startup}, patches: 1},
		"the other taints stay, in order":  {taints: []corev1.Taint{other, startup}, want: []corev1.Taint{other}, patches: 1},
		"a node without it is not written": {taints: []corev1.Taint{other}, want: []corev1.Taint{other}},
	} {
		t.Run(name, func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{Taints: tc.taints}}
			if got := source.Pending(n); got != (tc.patches > 0) {
				t.Errorf("Pending = %t", got)
			}
			client := fake.NewClientset(n)
			if err := source.RemoveStartupTaint(context.Background(), client.CoreV1().Nodes(), "n1", nil); err != nil {
				t.Fatal(err)
			}
			got, err := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Spec.Taints); diff != "" {
				t.Errorf("taints (-want +got):\n%s", diff)
			}
			patches := 0
			for _, a := range client.Actions() {
				if _, ok := a.(clienttesting.PatchAction); ok {
					patches++
				}
			}
			if patches != tc.patches {
				t.Errorf("%d patches, want %d", patches, tc.patches)
			}
		})
	}
}
