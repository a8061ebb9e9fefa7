package source

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-dkc/dkc/pkg/kubeclient"
)

// ProbeSource is the assignment Detect tries to write. It is never stored.
var ProbeSource = corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
	Namespace:        DefaultNamespace,
	Name:             "dkc-carrier-probe",
	KubeletConfigKey: DefaultKey,
}}

// Detect finds the carrier the apiserver supports for node nodeName. It sends
// a server-side dry-run merge patch that sets spec.configSource to
// ProbeSource: when the returned Node still has spec.configSource, the
// apiserver keeps the native field and the carrier is Native; when the field
// was dropped (apiserver 1.26+, or 1.23 to 1.25 without the
// DynamicKubeletConfig gate) it is Annotation. Nothing is persisted.
//
// An apiserver 1.26+ keeps the field on update when the stored Node already
// has one, so Detect reports Native for such a node, and native writes to it
// persist.
func Detect(ctx context.Context, nodes kubeclient.NodeClient, nodeName string) (Carrier, error) {
	patch, err := json.Marshal(map[string]any{
		"spec": map[string]any{"configSource": sourceValue(&ProbeSource)},
	})
	if err != nil {
		return "", fmt.Errorf("detect carrier of node %q: %w", nodeName, err)
	}
	node, err := nodes.Patch(ctx, nodeName, types.MergePatchType, patch, metav1.PatchOptions{
		DryRun:       []string{metav1.DryRunAll},
		FieldManager: FieldManager,
	})
	if err != nil {
		return "", fmt.Errorf("detect carrier of node %q: dry-run patch: %w", nodeName, err)
	}
	if node.Spec.ConfigSource != nil {
		return Native, nil
	}
	return Annotation, nil
}
