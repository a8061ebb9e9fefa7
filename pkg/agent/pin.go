package agent

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// assignment is a node's assignment as one sync observed it: the reference
// with the ConfigMap's uid and resourceVersion, the assigner's pin, the
// ConfigMap, and (once pinned has checked them) the bytes under its key.
type assignment struct {
	src     *corev1.NodeConfigSource
	pin     *source.Pin
	cm      *corev1.ConfigMap
	payload []byte
}

// pinned returns the payload of as when it is exactly what the assigner
// pinned: the pin names the assigned reference and its digest is the
// digest of the bytes under the assigned key. Otherwise it returns a
// *configError with ReasonPinMismatch (nothing pinned, or other bytes: the
// ConfigMap changed after it was assigned), or a load error for a missing
// key. It touches nothing.
func (a *Agent) pinned(as assignment) ([]byte, *configError) {
	ref := as.src.ConfigMap
	payload, err := source.Payload(as.cm, ref.KubeletConfigKey)
	if err != nil {
		return nil, loadError(err)
	}
	name := fmt.Sprintf("configmap %s/%s key %q", ref.Namespace, ref.Name, ref.KubeletConfigKey)
	if !as.pin.For(as.src) {
		why := "the node has no " + source.PinAnnotation + " annotation"
		if as.pin != nil {
			why = fmt.Sprintf("its %s annotation pins configmap %s/%s key %q", source.PinAnnotation, as.pin.Namespace, as.pin.Name, as.pin.KubeletConfigKey)
		}
		return nil, &configError{reason: ReasonPinMismatch, msg: fmt.Sprintf(
			"assignment of %s is not pinned (%s); the kubelet is untouched: assign it with `kubectl dkc assign %s --config %s`, which pins the bytes it assigns",
			name, why, a.NodeName, ref.Name)}
	}
	if got := source.Digest(payload); got != as.pin.Digest {
		return nil, &configError{reason: ReasonPinMismatch, msg: fmt.Sprintf(
			"%s holds bytes with digest %s, but the assignment pins %s: the ConfigMap changed after it was assigned; the kubelet is untouched: to apply the new bytes, assign it again with `kubectl dkc assign %s --config %s`",
			name, got, as.pin.Digest, a.NodeName, ref.Name)}
	}
	return payload, nil
}

// checkpoint saves the assigned key's bytes, and nothing else of the
// ConfigMap, as the checkpoint of as's uid and resourceVersion.
func (a *Agent) checkpoint(as assignment) error {
	ref := as.src.ConfigMap
	if err := a.Store.Save(ref.UID, ref.ResourceVersion, map[string][]byte{ref.KubeletConfigKey: as.payload}); err != nil {
		return fmt.Errorf("checkpoint %s: %w", describe(as.src), err)
	}
	return nil
}

// ignoredAnnotation returns the warning, once per version of the ConfigMap
// (warned is the version last warned about), that cm carries
// source.AllowUnsafeAnnotation, which is not honoured: its author expects an
// opt-in that only the assigner can give. It returns the version to
// remember, or "" when there is nothing to warn about.
func ignoredAnnotation(cm *corev1.ConfigMap, warned string) (event, string) {
	value, ok := cm.Annotations[source.AllowUnsafeAnnotation]
	key := string(cm.UID) + "/" + cm.ResourceVersion
	if !ok || warned == key {
		return event{}, ""
	}
	return event{reason: ReasonIgnoredAnnotation, message: fmt.Sprintf(
		"configmap %s/%s carries %s=%s, which is not honoured: only the assigner opts in to unsafe changes (kubectl dkc assign --allow-unsafe=CLASS)",
		cm.Namespace, cm.Name, source.AllowUnsafeAnnotation, value)}, key
}
