package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Condition types of a NodeConfigPool, as kstatus reads them.
const (
	// PoolReady: every node the pool selects runs its config.
	PoolReady = "Ready"
	// PoolReconciling: the controller is rolling the config out.
	PoolReconciling = "Reconciling"
	// PoolStalled: the rollout cannot go on without someone: a halted or
	// aborted rollout, a config that cannot be read or does not match
	// spec.digest.
	PoolStalled = "Stalled"
)

// Reasons of a NodeConfigPool's conditions. The controller sets one
// condition True with one of its reasons, and the other two False with the
// same reason.
const (
	// ReasonUpdated (Ready): every node the pool selects runs its current
	// revision.
	ReasonUpdated = "Updated"
	// ReasonRollingOut (Reconciling): a rollout of the current revision is
	// under way, or is created.
	ReasonRollingOut = "RollingOut"
	// ReasonApplying (Reconciling): every node is assigned the current
	// revision, and some do not run it yet.
	ReasonApplying = "Applying"
	// ReasonPaused (Reconciling): spec.paused, with nodes still to assign.
	ReasonPaused = "Paused"
	// ReasonInvalidWindow (Stalled): a window of spec.strategy.windows
	// names a time zone that does not exist.
	ReasonInvalidWindow = "InvalidWindow"
	// ReasonWaitingForOtherRollouts (Reconciling): the nodes still to assign
	// are covered by an unfinished rollout that is not the pool's.
	ReasonWaitingForOtherRollouts = "WaitingForOtherRollouts"
	// ReasonRolloutHalted and ReasonRolloutAborted (Stalled): the current
	// revision's rollout halted on a node's error, or was aborted.
	ReasonRolloutHalted  = "RolloutHalted"
	ReasonRolloutAborted = "RolloutAborted"
	// ReasonDigestMismatch (Stalled): the ConfigMap's bytes are not
	// spec.digest, or, with no spec.digest, not the bytes the current
	// revision was made with while the pool's spec is unchanged.
	ReasonDigestMismatch = "DigestMismatch"
	// ReasonConfigUnavailable (Stalled): the ConfigMap or its key is missing.
	ReasonConfigUnavailable = "ConfigUnavailable"
	// ReasonConfigOutsideNamespace (Stalled): spec.configSource names a
	// ConfigMap outside the pool's namespace.
	ReasonConfigOutsideNamespace = "ConfigOutsideNamespace"
	// ReasonInvalidSelector (Stalled): spec.nodeSelector does not parse.
	ReasonInvalidSelector = "InvalidSelector"
	// ReasonNodeSpecificConfig (Stalled): the config sets a node-specific
	// field (address, healthzBindAddress, providerID, podCIDR) to the
	// value one of the pool's nodes shows while the others differ: one
	// node's config, for many.
	ReasonNodeSpecificConfig = "NodeSpecificConfig"
	// ReasonShadowedByFlags (Stalled): the config changes a field that a
	// kubelet flag sets on one of the pool's nodes, as the node's agent
	// records its flags: a flag always wins over a config.
	ReasonShadowedByFlags = "ShadowedByFlags"
	// ReasonNeedsDrain (Stalled): the config changes a resource manager
	// policy on a node, and the pool's strategy does not drain, or its
	// spec.allowUnsafe does not allow resource-managers.
	ReasonNeedsDrain = "NeedsDrain"
)

// NodeConfigPool is the desired state of the nodes its selector picks: the
// controller rolls each change of its config out as a new revision, a
// NodeConfigRollout of its own.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=ncp,categories=dkc
// +kubebuilder:printcolumn:name=Config,type=string,JSONPath=`.spec.configSource.configMap.name`
// +kubebuilder:printcolumn:name=Revision,type=integer,JSONPath=`.status.revision`
// +kubebuilder:printcolumn:name=Selected,type=integer,JSONPath=`.status.nodes.selected`
// +kubebuilder:printcolumn:name=Updated,type=integer,JSONPath=`.status.nodes.updated`
// +kubebuilder:printcolumn:name=Failed,type=integer,JSONPath=`.status.nodes.failed`
// +kubebuilder:printcolumn:name=Ready,type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name=Paused,type=boolean,JSONPath=`.spec.paused`,priority=1
// +kubebuilder:printcolumn:name=Age,type=date,JSONPath=`.metadata.creationTimestamp`
type NodeConfigPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NodeConfigPoolSpec `json:"spec"`
	// +optional
	Status NodeConfigPoolStatus `json:"status,omitempty"`
}

// NodeConfigPoolSpec is the config the nodes the selector picks should run,
// and how a change is rolled out.
type NodeConfigPoolSpec struct {
	// NodeSelector picks the pool's nodes, as a Deployment's selector picks
	// pods; an empty one selects every node. A node that another pool of
	// the namespace picks too belongs to neither.
	NodeSelector metav1.LabelSelector `json:"nodeSelector"`
	// ConfigSource is the config the nodes run, as an assignment names it:
	// a ConfigMap in the config namespace and its key.
	// +kubebuilder:validation:XValidation:rule="has(self.configMap)",message="must name a configMap"
	ConfigSource corev1.NodeConfigSource `json:"configSource"`
	// Digest, when set, is the sha256 the config's bytes must have
	// ("sha256:<hex>"); when unset, each revision pins the bytes as the
	// controller first read them, and other bytes stall the pool until its
	// spec changes.
	// +optional
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	Digest string `json:"digest,omitempty"`
	// AllowUnsafe lists the safety classes the config may change
	// (docs/security.md).
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	AllowUnsafe []string `json:"allowUnsafe,omitempty"`
	// Strategy is how a change is rolled out.
	// +optional
	Strategy NodeConfigPoolStrategy `json:"strategy,omitempty"`
	// Paused stops the pool's rollouts: no node is started while true.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// NodeConfigPoolStrategy is a rollout's knobs, as `rollout start` takes
// them.
type NodeConfigPoolStrategy struct {
	// MaxUnavailable bounds the nodes restarting, in their health gate,
	// NotReady or cordoned at once: a count or a percentage.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^[0-9]+%$')",message="must be a count of at least 1 or a percentage such as 10%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	// Canary is how many nodes go first, alone.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	Canary *int32 `json:"canary,omitempty"`
	// Soak is how long a finished wave stays healthy before the next one
	// (a Go duration); with none, a slot freed by a finished node goes to
	// the next node.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	Soak metav1.Duration `json:"soak,omitempty"`
	// Drain allows draining the nodes whose change needs it (a resource
	// manager policy changes on them), each cordoned and drained before its
	// assignment and uncordoned after its health gate. Without it, such a
	// change stalls the pool (NeedsDrain).
	// +optional
	Drain bool `json:"drain,omitempty"`
	// OrderByLabel takes the nodes in the order of this label's value.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	OrderByLabel string `json:"orderByLabel,omitempty"`
	// Windows are the maintenance windows in which nodes start; none means
	// at any time. Outside every window no node starts, nodes already
	// started finish, and the pool's Reconciling condition has reason
	// OutsideWindow with the next window's start.
	// +optional
	Windows Windows `json:"windows,omitempty"`
	// PauseOnAlerts holds the pool's rollouts while an alert fires on an
	// Alertmanager the controller was started with (--alertmanager-url):
	// no node starts, and the pool's Reconciling condition has reason
	// PausedOnAlert with the alert's name, until it clears.
	// +optional
	PauseOnAlerts *PauseOnAlerts `json:"pauseOnAlerts,omitempty"`
}

// NodeConfigPoolStatus is what the controller last saw of the pool.
type NodeConfigPoolStatus struct {
	// ObservedGeneration is the generation of the spec this status is of.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions are Ready, Reconciling and Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Revision is the revision of the current config.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// CurrentRollout is the newest rollout of the current revision.
	// +optional
	CurrentRollout string `json:"currentRollout,omitempty"`
	// Digest is the sha256 of the current config's bytes, as pinned.
	// +optional
	Digest string `json:"digest,omitempty"`
	// Nodes counts the pool's nodes.
	// +optional
	Nodes PoolCounts `json:"nodes,omitempty"`
	// ConflictingNodes names the nodes that another pool picks too (the
	// first few).
	// +optional
	ConflictingNodes []string `json:"conflictingNodes,omitempty"`
}

// PoolCounts are the pool's nodes: those it selects (others' conflicts not
// included), those that run its config, those available (Ready and
// schedulable), those that reported an error for it, and those that
// another pool selects too.
type PoolCounts struct {
	// +optional
	Selected int32 `json:"selected"`
	// +optional
	Updated int32 `json:"updated"`
	// +optional
	Available int32 `json:"available"`
	// +optional
	Failed int32 `json:"failed"`
	// +optional
	Conflicting int32 `json:"conflicting"`
}

// NodeConfigPoolList is a list of NodeConfigPools.
//
// +kubebuilder:object:root=true
type NodeConfigPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []NodeConfigPool `json:"items"`
}
