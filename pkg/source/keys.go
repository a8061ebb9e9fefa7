// Package source is dkc's carrier: where an assignment (a NodeConfigSource)
// and its status (a NodeConfigStatus) live on a Node. Apiservers before 1.26
// keep the native spec.configSource and status.config fields; later ones drop
// them silently, so dkc carries the same JSON in annotations instead.
package source

import corev1 "k8s.io/api/core/v1"

// Prefix is the one prefix of every annotation, label and condition that dkc
// owns. docs/carrier.md documents each key.
const Prefix = "kubectl-dkc.io/"

const (
	// AssignedAnnotation holds the JSON of a corev1.NodeConfigSource: the
	// config the operator assigned to the node.
	AssignedAnnotation = Prefix + "config-source"
	// StatusAnnotation holds the JSON of a corev1.NodeConfigStatus, in the
	// same shape as the native status.config.
	StatusAnnotation = Prefix + "config-status"
	// ConfigLabel marks the ConfigMaps that dkc pushed, so they can be listed.
	ConfigLabel = Prefix + "kubelet-config"
	// PinAnnotation holds the JSON of a Pin: the digest of the bytes the
	// assigner decided the node applies, and the unsafe classes it allows.
	// It is the assigner's, like AssignedAnnotation, and is written with it.
	PinAnnotation = Prefix + "config-pin"
	// AllowUnsafeAnnotation on a ConfigMap is not honoured: a ConfigMap's
	// writer decides nothing. The opt-in is the assigner's (Pin.AllowUnsafe).
	// push and the agent warn when a ConfigMap carries it, because its
	// author expects it to work.
	AllowUnsafeAnnotation = Prefix + "allow-unsafe"

	// ConditionType is the Node condition the agent maintains, so that the
	// state shows in `kubectl describe node`.
	ConditionType corev1.NodeConditionType = "KubeletConfigOK"
	// ReasonVerifying is the reason of the ConditionType condition (status
	// Unknown) while the agent's health gate runs on a config the kubelet
	// already runs: its /configz shows the config and its /healthz passes,
	// and the gate waits for a Ready from the restarted kubelet. The status
	// then names the config as active; readers that wait for an apply to
	// end (assign --wait, rollout) wait for another reason.
	ReasonVerifying = "Verifying"

	// DefaultNamespace and DefaultKey match the old documented workflow.
	DefaultNamespace = "kube-system"
	DefaultKey       = "kubelet"
	// FieldManager is the field manager of every write dkc makes.
	FieldManager = "kubectl-dkc"
)
