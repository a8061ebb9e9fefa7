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
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubectl-dkc/dkc/pkg/apis/dkc/v1alpha1"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// The pool's API types are those of pkg/apis/dkc/v1alpha1, under the names
// the pool's code uses.
type (
	// Pool is a NodeConfigPool.
	Pool = v1alpha1.NodeConfigPool
	// Spec is the desired state of the pool's nodes.
	Spec = v1alpha1.NodeConfigPoolSpec
	// Strategy is a rollout's knobs, as `rollout start` takes them.
	Strategy = v1alpha1.NodeConfigPoolStrategy
	// Status is what the controller last saw of the pool.
	Status = v1alpha1.NodeConfigPoolStatus
	// Counts are the pool's nodes.
	Counts = v1alpha1.PoolCounts
)

// Kind is the kind of a Pool: the custom resource NodeConfigPool of
// deploy/crds.yaml, in group and version v1alpha1.SchemeGroupVersion.
const Kind = v1alpha1.NodeConfigPoolKind

// Resource is the NodeConfigPools' resource.
var Resource = v1alpha1.NodeConfigPoolResource

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

// Condition types, as kstatus reads them (v1alpha1.PoolReady and others).
const (
	Ready       = v1alpha1.PoolReady
	Reconciling = v1alpha1.PoolReconciling
	Stalled     = v1alpha1.PoolStalled
)

// Reasons of the conditions (v1alpha1.ReasonUpdated and others). Decide sets
// one condition True with one of its reasons, and the other two False with
// the same reason.
const (
	ReasonUpdated                 = v1alpha1.ReasonUpdated
	ReasonRollingOut              = v1alpha1.ReasonRollingOut
	ReasonApplying                = v1alpha1.ReasonApplying
	ReasonPaused                  = v1alpha1.ReasonPaused
	ReasonOutsideWindow           = v1alpha1.ReasonOutsideWindow
	ReasonInvalidWindow           = v1alpha1.ReasonInvalidWindow
	ReasonWaitingForOtherRollouts = v1alpha1.ReasonWaitingForOtherRollouts
	ReasonRolloutHalted           = v1alpha1.ReasonRolloutHalted
	ReasonRolloutAborted          = v1alpha1.ReasonRolloutAborted
	ReasonDigestMismatch          = v1alpha1.ReasonDigestMismatch
	ReasonConfigUnavailable       = v1alpha1.ReasonConfigUnavailable
	ReasonConfigOutsideNamespace  = v1alpha1.ReasonConfigOutsideNamespace
	ReasonInvalidSelector         = v1alpha1.ReasonInvalidSelector
	ReasonNodeSpecificConfig      = v1alpha1.ReasonNodeSpecificConfig
	ReasonShadowedByFlags         = v1alpha1.ReasonShadowedByFlags
	ReasonNeedsDrain              = v1alpha1.ReasonNeedsDrain
	ReasonPausedOnAlert           = v1alpha1.ReasonPausedOnAlert
	ReasonAlertsUnknown           = v1alpha1.ReasonAlertsUnknown
	ReasonAlertmanagerNotAllowed  = v1alpha1.ReasonAlertmanagerNotAllowed
	ReasonInvalidPauseOnAlerts    = v1alpha1.ReasonInvalidPauseOnAlerts
)

// Reasons are the reasons each condition is True with. docs/rollout.md
// lists them, and cmd/docs_test.go holds it to this map.
var Reasons = map[string][]string{
	Ready:       {ReasonUpdated},
	Reconciling: {ReasonRollingOut, ReasonOutsideWindow, ReasonPausedOnAlert, ReasonAlertsUnknown, ReasonApplying, ReasonPaused, ReasonWaitingForOtherRollouts},
	Stalled: {
		ReasonRolloutHalted, ReasonRolloutAborted, ReasonDigestMismatch, ReasonConfigUnavailable,
		ReasonConfigOutsideNamespace, ReasonInvalidSelector, ReasonNodeSpecificConfig, ReasonShadowedByFlags, ReasonNeedsDrain, ReasonInvalidWindow,
		ReasonInvalidPauseOnAlerts, ReasonAlertmanagerNotAllowed,
	},
}

var _ runtime.Object = &Pool{}
