// Package pool is the declarative side of rollouts: a NodeConfigPool says
// which config the nodes its selector picks should run, and how to roll a
// change out. The controller turns every change of a pool's spec that
// changes its config into a new revision, a NodeConfigRollout of the nodes
// that do not run it yet, as a Deployment turns a change of its template
// into a ReplicaSet. A revision fixes the bytes it first read: an edit of
// the ConfigMap alone makes no revision and stalls the pool. Nodes that join
// the pool later get the revision's bytes in a rollout of their own, under
// the same strategy.
package pool

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/pkg/status"
)

// Kind is the kind of a Pool: the custom resource NodeConfigPool of
// deploy/crds.yaml, in group and version status.SchemeGroupVersion.
const Kind = "NodeConfigPool"

// Resource is the NodeConfigPools' resource.
var Resource = status.SchemeGroupVersion.WithResource("nodeconfigpools")

const (
	// Label marks the rollouts of a pool; its value is the pool's name.
	Label = source.Prefix + "pool"
	// RevisionLabel is the revision a pool's rollout rolls out: 1 for the
	// pool's first config, one more for each change.
	RevisionLabel = source.Prefix + "revision"
	// GenerationAnnotation is the pool's metadata.generation when the
	// controller created the rollout. A halted or aborted rollout stops its
	// revision until the pool's spec changes, and the revision's bytes stay
	// fixed until then.
	GenerationAnnotation = source.Prefix + "pool-generation"
)

// NamespaceDenied is the end of the refusal of a pool created outside
// namespace, the controller's: the controller watches the pools of its own
// namespace only, so the admission policy kubectl-dkc-pool-namespace
// (deploy/admission-policy.yaml) refuses the others with these words.
func NamespaceDenied(namespace string) string {
	return "the dkc controller drives only the NodeConfigPools of its namespace, " + namespace +
		": create the pool there (metadata.namespace: " + namespace + ")"
}

// Condition types, as kstatus reads them.
const (
	// Ready: every node the pool selects runs its config.
	Ready = "Ready"
	// Reconciling: the controller is rolling the config out.
	Reconciling = "Reconciling"
	// Stalled: the rollout cannot go on without someone: a halted or
	// aborted rollout, a config that cannot be read or does not match
	// spec.digest.
	Stalled = "Stalled"
)

// Reasons of the conditions. Decide sets one condition True with one of its
// reasons, and the other two False with the same reason.
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
	// ReasonOutsideWindow (Reconciling): the current revision's rollout
	// is outside every window of spec.strategy.windows; the message gives
	// the next window's start.
	ReasonOutsideWindow = rollout.ReasonOutsideWindow
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
	// ReasonNeedsDrain (Stalled): the config changes a resource manager
	// policy on a node, and the pool's strategy does not drain, or its
	// spec.allowUnsafe does not allow resource-managers.
	ReasonNeedsDrain = "NeedsDrain"
)

// Reasons are the reasons each condition is True with. docs/rollout.md
// lists them, and cmd/docs_test.go holds it to this map.
var Reasons = map[string][]string{
	Ready:       {ReasonUpdated},
	Reconciling: {ReasonRollingOut, ReasonOutsideWindow, ReasonApplying, ReasonPaused, ReasonWaitingForOtherRollouts},
	Stalled: {
		ReasonRolloutHalted, ReasonRolloutAborted, ReasonDigestMismatch, ReasonConfigUnavailable,
		ReasonConfigOutsideNamespace, ReasonInvalidSelector, ReasonNodeSpecificConfig, ReasonNeedsDrain, ReasonInvalidWindow,
	},
}

// Pool is a NodeConfigPool.
type Pool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              Spec   `json:"spec"`
	Status            Status `json:"status,omitempty"`
}

// Spec is the desired state of the pool's nodes.
type Spec struct {
	// NodeSelector picks the pool's nodes. A node that another pool of the
	// namespace picks too belongs to neither.
	NodeSelector metav1.LabelSelector `json:"nodeSelector"`
	// ConfigSource is the config the nodes run, as an assignment names it.
	ConfigSource corev1.NodeConfigSource `json:"configSource"`
	// Digest, when set, is the sha256 the config's bytes must have
	// ("sha256:<hex>"); when unset, each revision pins the bytes as the
	// controller first read them, and other bytes stall the pool until its
	// spec changes.
	Digest string `json:"digest,omitempty"`
	// AllowUnsafe lists the safety classes the config may change.
	AllowUnsafe []string `json:"allowUnsafe,omitempty"`
	// Strategy is how a change is rolled out.
	Strategy Strategy `json:"strategy,omitempty"`
	// Paused stops the pool's rollouts: no node is started while true.
	Paused bool `json:"paused,omitempty"`
}

// Strategy is a rollout's knobs, as `rollout start` takes them.
type Strategy struct {
	// MaxUnavailable bounds the nodes restarting, in their health gate or
	// otherwise not available at once: a count or a percentage (default 1).
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	// Canary is how many nodes go first, alone (default 1).
	Canary *int32 `json:"canary,omitempty"`
	// Soak is how long a finished wave stays healthy before the next one;
	// with none, a slot freed by a finished node goes to the next node.
	Soak metav1.Duration `json:"soak,omitempty"`
	// Drain allows draining the nodes whose change needs it (a change of
	// a resource manager policy): each is cordoned and drained before
	// its assignment. Without it, such a change stalls the pool.
	Drain bool `json:"drain,omitempty"`
	// OrderByLabel takes the nodes in the order of this label's value.
	OrderByLabel string `json:"orderByLabel,omitempty"`
	// Windows are the maintenance windows in which nodes start; none: at
	// any time.
	Windows rollout.Windows `json:"windows,omitempty"`
}

// Status is what the controller last saw of the pool.
type Status struct {
	// ObservedGeneration is the generation of the spec this status is of.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions are Ready, Reconciling and Stalled.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Revision is the revision of the current config; CurrentRollout the
	// newest rollout of it.
	Revision       int64  `json:"revision,omitempty"`
	CurrentRollout string `json:"currentRollout,omitempty"`
	// Digest is the sha256 of the current config's bytes, as pinned.
	Digest string `json:"digest,omitempty"`
	// Nodes counts the pool's nodes.
	Nodes Counts `json:"nodes,omitempty"`
	// ConflictingNodes names the nodes that another pool picks too (the
	// first few).
	ConflictingNodes []string `json:"conflictingNodes,omitempty"`
}

// Counts are the pool's nodes: those it selects (others' conflicts not
// included), those that run its config, those available (Ready and
// schedulable), those that reported an error for it, and those that
// another pool selects too.
type Counts struct {
	Selected    int32 `json:"selected"`
	Updated     int32 `json:"updated"`
	Available   int32 `json:"available"`
	Failed      int32 `json:"failed"`
	Conflicting int32 `json:"conflicting"`
}

// DeepCopyInto copies in into out, through JSON: a pool is small and
// copied rarely.
func (in *Pool) DeepCopyInto(out *Pool) {
	*out = Pool{}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(in)
	if err == nil {
		err = runtime.DefaultUnstructuredConverter.FromUnstructured(u, out)
	}
	if err != nil {
		panic(err)
	}
}

// DeepCopy returns a deep copy of in.
func (in *Pool) DeepCopy() *Pool {
	if in == nil {
		return nil
	}
	out := new(Pool)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object, for kubectl's printers.
func (in *Pool) DeepCopyObject() runtime.Object { return in.DeepCopy() }

var _ runtime.Object = &Pool{}
