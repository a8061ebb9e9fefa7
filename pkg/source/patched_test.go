package source

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPatchedNode(t *testing.T) {
	src := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "a", KubeletConfigKey: "kubelet"}}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{"keep": "1", "drop": "2"}},
		Spec:       corev1.NodeSpec{ConfigSource: src},
	}
	got, err := PatchedNode(node, []byte(`{"metadata":{"annotations":{"drop":null,"add":"3"}},"spec":{"configSource":null}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{"keep": "1", "add": "3"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PatchedNode() (-want +got):\n%s", diff)
	}
	if node.Spec.ConfigSource == nil || node.Annotations["drop"] != "2" {
		t.Error("PatchedNode() modified its input")
	}
}
