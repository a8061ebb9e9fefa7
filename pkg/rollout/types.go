// Package rollout rolls a kubelet config out over a fleet of nodes: a canary
// first, then waves that never take more than a budget of nodes out of
// service, halting on the first node that reports an error.
//
// The rollout is a resumable client (design 1 of the design notes). Its
// state lives in the apiserver, in a NodeConfigRollout object in the config
// namespace (see Store), and in each node's carrier status: a node whose
// status shows the target config active is done, a node assigned the target
// but not yet running it is in progress. Any client can pick the rollout up
// where another left it (Run); every write to the rollout object carries a
// resourceVersion precondition, so two clients never take the same slot.
package rollout

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/pkg/status"
)

// Kind is the kind of a Rollout: the custom resource NodeConfigRollout of
// deploy/crds.yaml, in group and version status.SchemeGroupVersion.
const Kind = "NodeConfigRollout"

// Resource is the NodeConfigRollouts' resource.
var Resource = status.SchemeGroupVersion.WithResource("nodeconfigrollouts")

// GroupKind is the NodeConfigRollouts' group and kind.
var GroupKind = schema.GroupKind{Group: status.SchemeGroupVersion.Group, Kind: Kind}

// State is where a rollout stands as a whole.
type State string

const (
	// Running: a client may start nodes.
	Running State = "Running"
	// Paused: no node is started until `rollout resume`; nodes already
	// started finish.
	Paused State = "Paused"
	// Halted: a node reported an error for the target config; Reason names
	// it. No further node is started.
	Halted State = "Halted"
	// Aborted: the operator stopped the rollout. Nodes keep what they run.
	Aborted State = "Aborted"
	// Done: every node runs its target config.
	Done State = "Done"
)

// Terminal reports whether no client drives a rollout in state s any more.
func (s State) Terminal() bool { return s == Halted || s == Aborted || s == Done }

// Phase is where one node of a rollout stands.
type Phase string

const (
	// Waiting: the node has not been started. A waiting node may be queued
	// (NodeStatus.Queued): recorded as one of the next to start.
	Waiting Phase = "Waiting"
	// InProgress: the node was (or is about to be) assigned its target and
	// does not run it yet. It holds a slot of the budget.
	InProgress Phase = "InProgress"
	// Succeeded: the node runs its target and is Ready.
	Succeeded Phase = "Done"
	// Skipped: the node already ran its target when the rollout began, or
	// it left the cluster.
	Skipped Phase = "Skipped"
	// Failed: the node reported an error for its target (refused, rolled
	// back, download failure), or its drain or assignment failed.
	Failed Phase = "Failed"
)

// Finished reports whether a node in phase p needs nothing more.
func (p Phase) Finished() bool { return p == Succeeded || p == Skipped }

// Rollout is one rollout: what to roll out where, and how far it got.
type Rollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              Spec   `json:"spec"`
	Status            Status `json:"status"`
}

// Spec is what the operator asked for. Only Paused and Aborted change after
// creation (deploy/crds.yaml enforces it): they are how the operator stops
// a rollout, and whichever client drives it acts on them.
type Spec struct {
	// Paused asks that no further node be started until it is false again;
	// nodes already started finish. The driver moves State between Running
	// and Paused accordingly.
	Paused bool `json:"paused,omitempty"`
	// Aborted asks that the rollout stop for good; it cannot be set back.
	// The driver moves State to Aborted.
	Aborted bool `json:"aborted,omitempty"`
	// Config is the target of every node; nil means the node's local config
	// (rollout start --to-local).
	Config *corev1.NodeConfigSource `json:"config,omitempty"`
	// Pin pins Config: the digest of its bytes when the rollout started
	// and the unsafe classes it allows (rollout start --allow-unsafe).
	// Every node gets this pin, so an edit of the ConfigMap during the
	// rollout reaches no node.
	Pin *source.Pin `json:"pin,omitempty"`
	// Targets overrides Config per node: undo sends each node back to what
	// it ran before. A node listed with null goes back to its local config.
	Targets Targets `json:"targets,omitempty"`
	// TargetPins pins Targets, per node: undo gives each node back its
	// previous pin.
	TargetPins TargetPins `json:"targetPins,omitempty"`
	// Nodes lists the nodes in rollout order.
	Nodes []string `json:"nodes"`
	// Selector is how the nodes were chosen (-l), for display; "" for named
	// nodes or --all.
	Selector string `json:"selector,omitempty"`
	// MaxUnavailable bounds the nodes restarting, in their health gate, or
	// otherwise not Ready or cordoned at once: a count or a percentage of
	// Nodes (rounded down, at least 1).
	MaxUnavailable intstr.IntOrString `json:"maxUnavailable"`
	// Canary is how many nodes go first, alone.
	Canary int `json:"canary"`
	// Soak is how long a finished wave must stay healthy before the next
	// one starts. Without one, the nodes after the canary form one wave,
	// over which the budget slides (Waves).
	Soak metav1.Duration `json:"soak,omitempty"`
	// OrderByLabel sorted Nodes by this label's value, then by name.
	OrderByLabel string `json:"orderByLabel,omitempty"`
	// Drain lists the nodes that are cordoned and drained before their
	// assignment, because the config changes a resource manager policy on
	// them; they are uncordoned after the health gate.
	Drain []string `json:"drain,omitempty"`
	// DrainOptions are kubectl drain's knobs.
	DrainOptions DrainSpec `json:"drainOptions,omitempty"`
	// UndoOf names the rollout this one undoes.
	UndoOf string `json:"undoOf,omitempty"`
	// Windows are the maintenance windows in which nodes start; none:
	// at any time. Outside them no node starts, the nodes already started
	// finish, and status.reason says OutsideWindow with the next start.
	Windows Windows `json:"windows,omitempty"`
}

// DrainSpec is the stored form of DrainOptions.
type DrainSpec struct {
	Timeout            metav1.Duration `json:"timeout,omitempty"`
	Force              bool            `json:"force,omitempty"`
	DeleteEmptyDirData bool            `json:"deleteEmptyDirData,omitempty"`
}

// Status is how far the rollout got. Its size does not depend on the
// number of nodes: each node's part is on the node (Mark), and the status
// counts them.
type Status struct {
	// State is where the rollout stands, as its driver last wrote it;
	// empty until a driver first looked at it. Rollout.State is what it
	// stands at once the spec is taken into account.
	State State `json:"state,omitempty"`
	// Reason says why the rollout halted or was aborted: for a halt, the
	// node and its error.
	Reason string `json:"reason,omitempty"`
	// Wave is the index of the newest wave the rollout entered.
	Wave int `json:"wave"`
	// SoakSince is when the nodes before the next wave were last seen all
	// done and healthy; the next wave starts Soak after it.
	SoakSince *metav1.Time `json:"soakSince,omitempty"`
	// Counts counts the rollout's nodes by phase, as its driver last
	// wrote them.
	Counts Counts `json:"counts"`
	// Failures lists the nodes that failed, up to MaxFailures of them.
	Failures []Failure `json:"failures,omitempty"`
	// LastUpdate is when a client last wrote the rollout.
	LastUpdate metav1.Time `json:"lastUpdate"`

	// Nodes holds each node's phase, as derived from the nodes (Live),
	// for the CLI's view (rollout status -o json); the store never writes
	// it. A node absent here is Waiting.
	Nodes map[string]NodeStatus `json:"liveNodes,omitempty"`
	// LegacyNodes is status.nodes as an earlier dkc stored it, each
	// node's part in the rollout object; no driver of this version takes
	// such a rollout over (ErrLegacy).
	LegacyNodes json.RawMessage `json:"nodes,omitempty"`
}

// Counts counts a rollout's nodes by phase.
type Counts struct {
	Waiting    int `json:"waiting"`
	InProgress int `json:"inProgress"`
	Updated    int `json:"updated"`
	Skipped    int `json:"skipped"`
	Failed     int `json:"failed"`
}

// MaxFailures bounds Status.Failures.
const MaxFailures = 10

// Failure is a node that failed, with its error.
type Failure struct {
	Node  string `json:"node"`
	Error string `json:"error"`
}

// NodeStatus is one node's part in the rollout.
type NodeStatus struct {
	Phase Phase `json:"phase"`
	// Previous is the assignment the node had before the rollout started
	// it, which undo goes back to; nil means its local config.
	Previous *corev1.NodeConfigSource `json:"previous,omitempty"`
	// PreviousPin is Previous's pin.
	PreviousPin *source.Pin `json:"previousPin,omitempty"`
	// Error is the node's error for its target, when Failed.
	Error string `json:"error,omitempty"`
	// Cordoned: the rollout cordoned the node to drain it and has not
	// uncordoned it yet.
	Cordoned bool `json:"cordoned,omitempty"`
	// Marked: the node's mark names the rollout, which started it.
	Marked bool `json:"marked,omitempty"`
	// Started and Finished bound the node's apply, as the rollout saw it.
	Started  *metav1.MicroTime `json:"started,omitempty"`
	Finished *metav1.MicroTime `json:"finished,omitempty"`
}

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

// Target is the config node must end on, with its pin; nil means its local
// config.
func (s *Spec) Target(node string) (*corev1.NodeConfigSource, *source.Pin) {
	if t, ok := s.Targets[node]; ok {
		return t, s.TargetPins[node]
	}
	return s.Config, s.Pin
}

// State is where r stands, with what its spec asks and no driver acted on
// yet: an aborted rollout is Aborted (unless it is Done), a paused one that
// was Running is Paused, an unpaused one that was Paused is Running, and a
// rollout no driver has looked at yet is Running.
func (r *Rollout) State() State {
	st := r.Status.State
	if st == "" {
		st = Running
	}
	switch {
	case r.Spec.Aborted && st != Done:
		return Aborted
	case r.Spec.Paused && st == Running:
		return Paused
	case !r.Spec.Paused && st == Paused:
		return Running
	}
	return st
}

// NodeStatus returns node's status; Waiting when it has none.
func (r *Rollout) NodeStatus(node string) NodeStatus {
	if ns, ok := r.Status.Nodes[node]; ok {
		return ns
	}
	return NodeStatus{Phase: Waiting}
}

// New returns a Rollout with its TypeMeta set and no status: its State is
// Running.
func New(namespace, name string, spec Spec) *Rollout {
	return &Rollout{
		TypeMeta:   metav1.TypeMeta{Kind: Kind, APIVersion: status.SchemeGroupVersion.String()},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       spec,
	}
}

// DescribeTarget names a target for humans: namespace/name, or <local>.
func DescribeTarget(src *corev1.NodeConfigSource) string {
	return status.FormatSource(src, false)
}

// RolloutList is a list of NodeConfigRollouts.
type RolloutList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []Rollout `json:"items"`
}

// DeepCopyInto copies in into out.
func (in *Rollout) DeepCopyInto(out *Rollout) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.Config = in.Spec.Config.DeepCopy()
	out.Spec.Pin = in.Spec.Pin.DeepCopy()
	if in.Spec.Targets != nil {
		out.Spec.Targets = make(map[string]*corev1.NodeConfigSource, len(in.Spec.Targets))
		for k, v := range in.Spec.Targets {
			out.Spec.Targets[k] = v.DeepCopy()
		}
	}
	if in.Spec.TargetPins != nil {
		out.Spec.TargetPins = make(map[string]*source.Pin, len(in.Spec.TargetPins))
		for k, v := range in.Spec.TargetPins {
			out.Spec.TargetPins[k] = v.DeepCopy()
		}
	}
	out.Spec.Nodes = append([]string(nil), in.Spec.Nodes...)
	out.Spec.Drain = append([]string(nil), in.Spec.Drain...)
	out.Spec.Windows = in.Spec.Windows.DeepCopy()
	if in.Status.SoakSince != nil {
		out.Status.SoakSince = in.Status.SoakSince.DeepCopy()
	}
	out.Status.Failures = append([]Failure(nil), in.Status.Failures...)
	out.Status.LegacyNodes = append(json.RawMessage(nil), in.Status.LegacyNodes...)
	if in.Status.Nodes != nil {
		out.Status.Nodes = make(map[string]NodeStatus, len(in.Status.Nodes))
		for k, v := range in.Status.Nodes {
			v.Previous = v.Previous.DeepCopy()
			v.PreviousPin = v.PreviousPin.DeepCopy()
			if v.Started != nil {
				v.Started = v.Started.DeepCopy()
			}
			if v.Finished != nil {
				v.Finished = v.Finished.DeepCopy()
			}
			out.Status.Nodes[k] = v
		}
	}
}

// DeepCopy returns a deep copy of in.
func (in *Rollout) DeepCopy() *Rollout {
	if in == nil {
		return nil
	}
	out := new(Rollout)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object, for kubectl's printers.
func (in *Rollout) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyObject implements runtime.Object, for kubectl's printers.
func (in *RolloutList) DeepCopyObject() runtime.Object {
	out := &RolloutList{TypeMeta: in.TypeMeta}
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	for i := range in.Items {
		out.Items = append(out.Items, *in.Items[i].DeepCopy())
	}
	return out
}

var (
	_ runtime.Object = &Rollout{}
	_ runtime.Object = &RolloutList{}
)
