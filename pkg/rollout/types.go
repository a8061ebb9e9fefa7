// Package rollout rolls a kubelet config out over a fleet of nodes: a canary
// first, then waves that never take more than a budget of nodes out of
// service, halting on the first node that reports an error.
//
// The rollout is driven by a reconciler (Reconciler), hosted by the
// controller or by the CLI (Run). Its state lives in the apiserver: in a
// NodeConfigRollout object in the config namespace (see Store), in each
// node's mark (Mark) and carrier status, and in the rollout's Lease. A node
// whose status shows the target config active is done, a node marked but
// not yet running it is in progress. Any client can pick the rollout up
// where another left it; one acts at a time, the holder of the Lease, and
// every write to the rollout object carries a resourceVersion
// precondition.
package rollout

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubectl-dkc/dkc/pkg/apis/dkc/v1alpha1"
	"github.com/kubectl-dkc/dkc/pkg/status"
)

// The rollout's API types are those of pkg/apis/dkc/v1alpha1, under the
// names the rollout's code uses.
type (
	// Rollout is one rollout: what to roll out where, and how far it got.
	Rollout = v1alpha1.NodeConfigRollout
	// RolloutList is a list of NodeConfigRollouts.
	RolloutList = v1alpha1.NodeConfigRolloutList
	// Spec is what the operator asked for.
	Spec = v1alpha1.NodeConfigRolloutSpec
	// Status is how far the rollout got.
	Status = v1alpha1.NodeConfigRolloutStatus
	// DrainSpec is the stored form of DrainOptions.
	DrainSpec = v1alpha1.DrainSpec
	// Counts counts a rollout's nodes by phase.
	Counts = v1alpha1.RolloutCounts
	// Failure is a node that failed, with its error.
	Failure = v1alpha1.RolloutFailure
	// NodeStatus is one node's part in the rollout.
	NodeStatus = v1alpha1.RolloutNodeStatus
	// State is where a rollout stands as a whole.
	State = v1alpha1.RolloutState
	// Phase is where one node of a rollout stands.
	Phase = v1alpha1.NodePhase
	// Targets are an undo's per-node targets (Spec.Targets).
	Targets = v1alpha1.Targets
	// TargetPins are the pins of Targets (Spec.TargetPins).
	TargetPins = v1alpha1.TargetPins
	// Window is a maintenance window.
	Window = v1alpha1.Window
	// Windows are a rollout's windows. None means always open.
	Windows = v1alpha1.Windows
)

// Kind is the kind of a Rollout: the custom resource NodeConfigRollout of
// deploy/crds.yaml, in group and version v1alpha1.SchemeGroupVersion.
const Kind = v1alpha1.NodeConfigRolloutKind

// Resource is the NodeConfigRollouts' resource.
var Resource = v1alpha1.NodeConfigRolloutResource

// GroupKind is the NodeConfigRollouts' group and kind.
var GroupKind = schema.GroupKind{Group: v1alpha1.GroupName, Kind: Kind}

// States of a rollout (v1alpha1.RolloutState).
const (
	Running = v1alpha1.RolloutRunning
	Paused  = v1alpha1.RolloutPaused
	Halted  = v1alpha1.RolloutHalted
	Aborted = v1alpha1.RolloutAborted
	Done    = v1alpha1.RolloutDone
)

// Phases of a node in a rollout (v1alpha1.NodePhase).
const (
	Waiting    = v1alpha1.NodeWaiting
	InProgress = v1alpha1.NodeInProgress
	Succeeded  = v1alpha1.NodeSucceeded
	Skipped    = v1alpha1.NodeSkipped
	Failed     = v1alpha1.NodeFailed
)

// MaxFailures bounds Status.Failures.
const MaxFailures = v1alpha1.MaxFailures

// Count counts r's nodes by phase, from Status.Nodes.
func Count(r *Rollout) Counts {
	var c Counts
	for _, n := range r.Spec.Nodes {
		switch r.NodeStatus(n).Phase {
		case InProgress:
			c.InProgress++
		case Succeeded:
			c.Updated++
		case Skipped:
			c.Skipped++
		case Failed:
			c.Failed++
		default:
			c.Waiting++
		}
	}
	return c
}

// New returns a Rollout with its TypeMeta set and no status: its State is
// Running.
func New(namespace, name string, spec Spec) *Rollout {
	return &Rollout{
		TypeMeta:   metav1.TypeMeta{Kind: Kind, APIVersion: v1alpha1.SchemeGroupVersion.String()},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       spec,
	}
}

// DescribeTarget names a target for humans: namespace/name, or <local>.
func DescribeTarget(src *corev1.NodeConfigSource) string {
	return status.FormatSource(src, false)
}

var (
	_ runtime.Object = &Rollout{}
	_ runtime.Object = &RolloutList{}
)
