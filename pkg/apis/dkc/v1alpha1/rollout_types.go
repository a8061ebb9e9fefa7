package v1alpha1

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// RolloutState is where a rollout stands as a whole.
//
// +kubebuilder:validation:Enum=Running;Paused;Halted;Aborted;Done
type RolloutState string

const (
	// RolloutRunning: a client may start nodes.
	RolloutRunning RolloutState = "Running"
	// RolloutPaused: no node is started until `rollout resume`; nodes
	// already started finish.
	RolloutPaused RolloutState = "Paused"
	// RolloutHalted: a node reported an error for the target config; Reason
	// names it. No further node is started.
	RolloutHalted RolloutState = "Halted"
	// RolloutAborted: the operator stopped the rollout. Nodes keep what they
	// run.
	RolloutAborted RolloutState = "Aborted"
	// RolloutDone: every node runs its target config.
	RolloutDone RolloutState = "Done"
)

// Terminal reports whether no client drives a rollout in state s any more.
func (s RolloutState) Terminal() bool {
	return s == RolloutHalted || s == RolloutAborted || s == RolloutDone
}

// ReasonBudgetHeld starts a running rollout's status.reason while no node
// starts because nodes it did not start (cordoned, NotReady) are
// unavailable and fill its budget, with nothing of its own in progress; the
// nodes and what to do follow.
const ReasonBudgetHeld = "BudgetHeld"

// NodePhase is where one node of a rollout stands.
type NodePhase string

const (
	// NodeWaiting: the node has not been started.
	NodeWaiting NodePhase = "Waiting"
	// NodeInProgress: the node was (or is about to be) assigned its target
	// and does not run it yet. It holds a slot of the budget.
	NodeInProgress NodePhase = "InProgress"
	// NodeSucceeded: the node runs its target and is Ready.
	NodeSucceeded NodePhase = "Done"
	// NodeSkipped: the node already ran its target when the rollout began,
	// or it left the cluster.
	NodeSkipped NodePhase = "Skipped"
	// NodeFailed: the node reported an error for its target (refused,
	// rolled back, download failure), or its drain or assignment failed.
	NodeFailed NodePhase = "Failed"
)

// Finished reports whether a node in phase p needs nothing more.
func (p NodePhase) Finished() bool { return p == NodeSucceeded || p == NodeSkipped }

// NodeConfigRollout is one rollout of a kubelet config over a list of nodes:
// what the operator asked for (spec) and how far it got (status, written
// only by the rollout's driver: the controller, or kubectl dkc rollout start
// --wait where no controller runs).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=ncr,categories=dkc
// +kubebuilder:printcolumn:name=State,type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name=Config,type=string,JSONPath=`.spec.config.configMap.name`
// +kubebuilder:printcolumn:name=Wave,type=integer,JSONPath=`.status.wave`
// +kubebuilder:printcolumn:name=Updated,type=integer,JSONPath=`.status.counts.updated`
// +kubebuilder:printcolumn:name=In-Progress,type=integer,JSONPath=`.status.counts.inProgress`
// +kubebuilder:printcolumn:name=Reason,type=string,JSONPath=`.status.reason`,priority=1
// +kubebuilder:printcolumn:name=Age,type=date,JSONPath=`.metadata.creationTimestamp`
type NodeConfigRollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NodeConfigRolloutSpec `json:"spec"`
	// +optional
	Status NodeConfigRolloutStatus `json:"status"`
}

// NodeConfigRolloutSpec is what the operator asked for. Only paused and
// aborted change after creation: they are how the operator stops a
// rollout, and whichever client drives it acts on them.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.aborted) || !oldSelf.aborted || (has(self.aborted) && self.aborted)",message="an aborted rollout stays aborted; start a new one"
// +kubebuilder:validation:XValidation:rule="has(self.config) == has(oldSelf.config) && has(self.pin) == has(oldSelf.pin) && has(self.targets) == has(oldSelf.targets)",message="the config, pin and targets of a rollout do not change; start a new one"
// +kubebuilder:validation:XValidation:rule="has(self.targetPins) == has(oldSelf.targetPins) && has(self.selector) == has(oldSelf.selector) && has(self.maxUnavailable) == has(oldSelf.maxUnavailable) && has(self.canary) == has(oldSelf.canary) && has(self.soak) == has(oldSelf.soak) && has(self.orderByLabel) == has(oldSelf.orderByLabel) && has(self.drain) == has(oldSelf.drain) && has(self.drainOptions) == has(oldSelf.drainOptions) && has(self.undoOf) == has(oldSelf.undoOf) && has(self.windows) == has(oldSelf.windows) && has(self.nodes) == has(oldSelf.nodes) && has(self.drainAll) == has(oldSelf.drainAll) && has(self.undoOfUID) == has(oldSelf.undoOfUID) && has(self.allowUnsafe) == has(oldSelf.allowUnsafe)",message="only paused and aborted change after a rollout is created; start a new one"
// +kubebuilder:validation:XValidation:rule="has(self.pauseOnAlerts) == has(oldSelf.pauseOnAlerts)",message="only paused and aborted change after a rollout is created; start a new one"
type NodeConfigRolloutSpec struct {
	// Paused asks that no further node be started until it is false again;
	// nodes already started finish. The driver moves State between Running
	// and Paused accordingly.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// Aborted asks that the rollout stop for good; it cannot be set back.
	// The driver moves State to Aborted; nodes keep what they run.
	// +optional
	Aborted bool `json:"aborted,omitempty"`
	// Config is the target of every node; absent means each node's local
	// config (rollout start --to-local).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable"
	Config *corev1.NodeConfigSource `json:"config,omitempty"`
	// Pin pins Config: the sha256 of its bytes when the rollout started and
	// the unsafe classes it allows (rollout start --allow-unsafe). Every
	// node gets this pin, so an edit of the ConfigMap during the rollout
	// reaches no node.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable"
	Pin *source.Pin `json:"pin,omitempty"`
	// Targets overrides Config per node: undo sends each node back to what
	// it ran before. They are stored in groups, each config once with its
	// nodes; a null config means the nodes' local config.
	// +optional
	// +kubebuilder:validation:Type=array
	// +kubebuilder:validation:MaxItems=5000
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable"
	Targets Targets `json:"targets,omitempty"`
	// TargetPins pins Targets, per node: undo gives each node back its
	// previous pin. They are stored in groups, each pin once with its nodes.
	// +optional
	// +kubebuilder:validation:Type=array
	// +kubebuilder:validation:MaxItems=5000
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable"
	TargetPins TargetPins `json:"targetPins,omitempty"`
	// Nodes lists the nodes in rollout order, when the operator named
	// them. Without it the rollout covers the nodes Selector selects, as
	// they are at each step (an undo: the nodes the undone rollout's marks
	// name), so that its size does not grow with the fleet.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=5000
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable"
	Nodes []string `json:"nodes,omitempty"`
	// Selector is the label selector of the nodes (-l; "" selects every
	// node). When Nodes is set it only tells how they were chosen.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable; start a new rollout"
	Selector string `json:"selector,omitempty"`
	// MaxUnavailable bounds the nodes restarting, in their health gate, or
	// otherwise not Ready or cordoned at once: a count or a percentage of
	// Nodes (rounded down, at least 1).
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^[0-9]+%$')",message="must be a count of at least 1 or a percentage such as 10%"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable; start a new rollout"
	MaxUnavailable intstr.IntOrString `json:"maxUnavailable"`
	// Canary is how many nodes go first, alone.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable; start a new rollout"
	Canary int `json:"canary"`
	// Soak is how long a finished wave must stay healthy before the next
	// one starts (a Go duration, 2m). Without one, the nodes after the
	// canary form one wave, over which the budget slides.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable; start a new rollout"
	Soak metav1.Duration `json:"soak,omitempty"`
	// OrderByLabel sorted Nodes by this label's value, then by name.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable; start a new rollout"
	OrderByLabel string `json:"orderByLabel,omitempty"`
	// Drain lists the nodes that are cordoned and drained before their
	// assignment, because the config changes a resource manager policy on
	// them; they are uncordoned after the health gate.
	// +optional
	// +kubebuilder:validation:MaxItems=5000
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable; start a new rollout"
	Drain []string `json:"drain,omitempty"`
	// DrainAll: every node of a rollout that does not list its nodes is
	// cordoned and drained before its assignment (an undo: also those
	// the undone rollout did not drain).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable; start a new rollout"
	DrainAll bool `json:"drainAll,omitempty"`
	// DrainOptions are kubectl drain's knobs.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable; start a new rollout"
	DrainOptions DrainSpec `json:"drainOptions,omitempty"`
	// UndoOf names the rollout this one undoes.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable; start a new rollout"
	UndoOf string `json:"undoOf,omitempty"`
	// UndoOfUID is the UID of the rollout this one undoes. An undo that
	// does not list its nodes covers those whose mark names this UID (and
	// its own), and sends each back to the assignment its mark recorded.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable; start a new rollout"
	UndoOfUID types.UID `json:"undoOfUID,omitempty"`
	// AllowUnsafe are the unsafe classes that the pins an undo gives back
	// allow, as its author was admitted for them: the union of the
	// previous pins its marks recorded when it was planned. A node whose
	// recorded pin allows more gets no pin, and its agent refuses it.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable; start a new rollout"
	AllowUnsafe []string `json:"allowUnsafe,omitempty"`
	// Windows are the maintenance windows in which nodes start; none means
	// at any time. Outside every window no node starts, nodes already
	// started finish, and the rollout's reason is OutsideWindow with the
	// next window's start.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable; start a new rollout"
	Windows Windows `json:"windows,omitempty"`
	// PauseOnAlerts holds the rollout while an alert fires: no node
	// starts, nodes already started finish, and the rollout's reason is
	// PausedOnAlert with the alert's name, until it clears. An
	// Alertmanager that does not answer holds it too (AlertsUnknown).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable; start a new rollout"
	PauseOnAlerts *PauseOnAlerts `json:"pauseOnAlerts,omitempty"`
}

// DrainSpec is the stored form of kubectl drain's knobs.
type DrainSpec struct {
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	Timeout metav1.Duration `json:"timeout,omitempty"`
	// +optional
	Force bool `json:"force,omitempty"`
	// +optional
	DeleteEmptyDirData bool `json:"deleteEmptyDirData,omitempty"`
}

// NodeConfigRolloutStatus is how far the rollout got, as its driver last
// wrote it. Its size does not depend on the number of nodes: each node's
// part is on the Node, and the status counts them.
type NodeConfigRolloutStatus struct {
	// State is where the rollout stands, as its driver last wrote it;
	// empty until a driver first looked at it. NodeConfigRollout.State is
	// what it stands at once the spec is taken into account.
	// +optional
	State RolloutState `json:"state,omitempty"`
	// Reason says why the rollout halted or was aborted: for a halt, the
	// node and its error; at most MaxMessageBytes.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
	// Wave is the index of the newest wave the rollout entered.
	// +optional
	Wave int `json:"wave"`
	// SoakSince is when the nodes before the next wave were last seen all
	// done and healthy; the next wave starts Soak after it.
	// +optional
	SoakSince *metav1.Time `json:"soakSince,omitempty"`
	// Counts counts the rollout's nodes by phase, as its driver last
	// counted them. Each node's own part is on the Node, in its annotation
	// kubectl-dkc.io/rollout.
	// +optional
	Counts RolloutCounts `json:"counts"`
	// Failures lists the nodes that failed, with their errors; the first
	// MaxFailures.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	Failures []RolloutFailure `json:"failures,omitempty"`
	// LastUpdate is when a client last wrote the rollout.
	// +optional
	LastUpdate metav1.Time `json:"lastUpdate"`

	// Nodes holds each node's phase, as derived from the nodes, for the
	// CLI's view (rollout status -o json); the driver never writes it. A
	// node absent here is Waiting.
	// +optional
	Nodes map[string]RolloutNodeStatus `json:"liveNodes,omitempty"`
	// LegacyNodes is each node's phase as an earlier dkc kept it in the
	// rollout; this version does not drive such a rollout (kubectl dkc
	// rollout abort it and start it again).
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	LegacyNodes json.RawMessage `json:"nodes,omitempty"`
}

// RolloutCounts counts a rollout's nodes by phase.
type RolloutCounts struct {
	// +optional
	Waiting int `json:"waiting"`
	// +optional
	InProgress int `json:"inProgress"`
	// +optional
	Updated int `json:"updated"`
	// +optional
	Skipped int `json:"skipped"`
	// +optional
	Failed int `json:"failed"`
}

// MaxFailures bounds NodeConfigRolloutStatus.Failures.
const MaxFailures = 10

// MaxMessageBytes bounds the status's reason and each failure's error, so
// that a rollout's size does not depend on what its nodes report.
const MaxMessageBytes = 1024

// RolloutFailure is a node that failed, with its error.
type RolloutFailure struct {
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node"`
	// Error is the node's error, at most MaxMessageBytes.
	// +kubebuilder:validation:MaxLength=1024
	Error string `json:"error"`
}

// RolloutNodeStatus is one node's part in the rollout.
type RolloutNodeStatus struct {
	Phase NodePhase `json:"phase"`
	// Previous is the assignment the node had before the rollout started
	// it, which undo goes back to; nil means its local config.
	// +optional
	Previous *corev1.NodeConfigSource `json:"previous,omitempty"`
	// PreviousPin is Previous's pin.
	// +optional
	PreviousPin *source.Pin `json:"previousPin,omitempty"`
	// Error is the node's error for its target, when Failed.
	// +optional
	Error string `json:"error,omitempty"`
	// Cordoned: the rollout cordoned the node to drain it and has not
	// uncordoned it yet.
	// +optional
	Cordoned bool `json:"cordoned,omitempty"`
	// Marked: the node's mark names the rollout, which started it.
	// +optional
	Marked bool `json:"marked,omitempty"`
	// Started and Finished bound the node's apply, as the rollout saw it.
	// +optional
	Started *metav1.MicroTime `json:"started,omitempty"`
	// +optional
	Finished *metav1.MicroTime `json:"finished,omitempty"`
}

// Target is the config node must end on, with its pin; nil means its local
// config.
func (s *NodeConfigRolloutSpec) Target(node string) (*corev1.NodeConfigSource, *source.Pin) {
	if t, ok := s.Targets[node]; ok {
		return t, s.TargetPins[node]
	}
	return s.Config, s.Pin
}

// State is where r stands, with what its spec asks and no driver acted on
// yet: an aborted rollout is Aborted (unless it is Done), a paused one that
// was Running is Paused, an unpaused one that was Paused is Running, and a
// rollout no driver has looked at yet is Running.
func (r *NodeConfigRollout) State() RolloutState {
	st := r.Status.State
	if st == "" {
		st = RolloutRunning
	}
	switch {
	case r.Spec.Aborted && st != RolloutDone:
		return RolloutAborted
	case r.Spec.Paused && st == RolloutRunning:
		return RolloutPaused
	case !r.Spec.Paused && st == RolloutPaused:
		return RolloutRunning
	}
	return st
}

// NodeStatus returns node's status; Waiting when it has none.
func (r *NodeConfigRollout) NodeStatus(node string) RolloutNodeStatus {
	if ns, ok := r.Status.Nodes[node]; ok {
		return ns
	}
	return RolloutNodeStatus{Phase: NodeWaiting}
}

// NodeConfigRolloutList is a list of NodeConfigRollouts.
//
// +kubebuilder:object:root=true
type NodeConfigRolloutList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []NodeConfigRollout `json:"items"`
}
