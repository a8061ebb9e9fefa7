package rollout

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/pkg/status"
)

// Observed is what a node's carrier and conditions say about its part in a
// rollout.
type Observed struct {
	// Assigned: the node is assigned its target.
	Assigned bool
	// Holds is the node's assignment when it is not its target (nil: the
	// local config, or the target when Assigned).
	Holds *corev1.NodeConfigSource
	// Running: the node runs its target without error (status active).
	Running bool
	// Error is the node's error for its target.
	Error string
	// Ready and Schedulable are the node's Ready condition and
	// !spec.unschedulable.
	Ready, Schedulable bool
	// Mark is the node's mark (MarkAnnotation), of whichever rollout
	// started it last; nil when none did.
	Mark *Mark
}

// Available reports whether the node serves: Ready and schedulable.
func (o Observed) Available() bool { return o.Ready && o.Schedulable }

// Observe reads node against target (nil: its local config) pinned by pin.
// The carrier is the only source of truth: status.active is what the agent
// saw the kubelet run after its health gate. A node assigned target under
// another pin is not assigned it: its agent judges other bytes.
func Observe(node *corev1.Node, target *corev1.NodeConfigSource, pin *source.Pin) (Observed, error) {
	o := Observed{Ready: IsReady(node), Schedulable: !node.Spec.Unschedulable}
	mark, err := MarkOf(node)
	if err != nil {
		return o, err
	}
	o.Mark = mark
	item, err := status.FromNode(node)
	if err != nil {
		return o, err
	}
	o.Assigned = source.Equal(item.ConfigSource, target)
	if o.Assigned && target != nil {
		got, err := source.PinOf(node)
		if err != nil {
			return o, err
		}
		o.Assigned = got.Equal(pin)
	}
	if !o.Assigned {
		o.Holds = item.ConfigSource
		return o, nil
	}
	done, failed := status.Reached(item, status.WaitActive)
	o.Running = done
	if failed != nil {
		o.Error = item.Status.Error
	}
	return o, nil
}

// observations remembers what Observe said of each node, by the Node's
// resourceVersion, so that a pass over a large rollout decodes only the
// nodes that changed since the last pass rather than every node's status
// annotations on every event. A node with no resourceVersion is observed
// every time. This holds only while Observe is a function of the Node object
// and the target alone: what it reads of status.FromNode's time-dependent
// AgentState (Verifying, through status.Reached) comes from the node's
// condition, not from the clock.
// The workers of a pass that starts nodes share it (interrupted): mu
// guards byNode.
type observations struct {
	mu     sync.Mutex
	byNode map[string]observation
}

type observation struct {
	resourceVersion string
	target          *corev1.NodeConfigSource
	pin             *source.Pin
	observed        Observed
	err             error
}

// observe is Observe, answered from the last observation of the same
// version of node against the same target when there is one.
func (c *observations) observe(node *corev1.Node, target *corev1.NodeConfigSource, pin *source.Pin) (Observed, error) {
	rv := node.ResourceVersion
	c.mu.Lock()
	last, ok := c.byNode[node.Name]
	c.mu.Unlock()
	if ok && rv != "" && last.resourceVersion == rv && source.Equal(last.target, target) && last.pin.Equal(pin) {
		return last.observed, last.err
	}
	o, err := Observe(node, target, pin)
	if rv != "" {
		c.mu.Lock()
		if c.byNode == nil {
			c.byNode = map[string]observation{}
		}
		c.byNode[node.Name] = observation{resourceVersion: rv, target: target.DeepCopy(), pin: pin.DeepCopy(), observed: o, err: err}
		c.mu.Unlock()
	}
	return o, err
}

// SlimNode is a transform for an informer on Nodes (SetTransform): it drops
// what no driver reads and a large node carries most of, its managed
// fields, images and volumes, so that a cache of a large fleet takes less
// memory. Nothing writes a Node it cached back whole: the drivers patch.
func SlimNode(obj any) (any, error) {
	if n, ok := obj.(*corev1.Node); ok {
		n.ManagedFields = nil
		n.Status.Images = nil
		n.Status.VolumesInUse = nil
		n.Status.VolumesAttached = nil
	}
	return obj, nil
}

// IsReady reports whether node's Ready condition is True.
func IsReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// NextPhase is the phase of a node recorded as rec, now that it is observed
// as o. A node in progress is one the rollout started: its mark names the
// rollout (record derives rec from it).
//
// A node in progress that holds neither its target nor the assignment it had
// before the rollout (rec.Previous) was assigned another config by hand
// while its apply ran: it fails, so that the rollout halts and names it
// rather than wait forever for a target the node no longer has, or assign
// over the operator's choice. A node that holds its previous assignment is
// one marked but not assigned yet (it is being drained, or a driver died in
// between): the driver assigns it.
func NextPhase(rec NodeStatus, o Observed) (Phase, string) {
	switch rec.Phase {
	case Succeeded, Skipped, Failed:
		return rec.Phase, rec.Error
	case InProgress:
		switch {
		case o.Error != "":
			return Failed, o.Error
		case o.Running && o.Ready && !rec.Cordoned:
			return Succeeded, ""
		case o.Running && o.Ready:
			return InProgress, "" // to uncordon (decide)
		case !o.Assigned && !source.Equal(o.Holds, rec.Previous):
			return Failed, changedOutside(o.Holds, rec.Previous)
		}
		return InProgress, ""
	}
	// Waiting: a node the rollout did not start that already runs its
	// target is skipped. One that is assigned its target (by hand) holds a
	// slot like any node in progress.
	switch {
	case o.Assigned && o.Error != "":
		return Failed, o.Error
	case o.Running:
		return Skipped, ""
	case o.Assigned:
		return InProgress, ""
	}
	return Waiting, ""
}

// changedOutside is the error of a node in progress that holds holds, and
// not previous, the assignment the rollout recorded for it before it
// started it.
func changedOutside(holds, previous *corev1.NodeConfigSource) string {
	return fmt.Sprintf("assignment changed outside the rollout to %s while the rollout applied its config (before the rollout: %s); halted so as not to overwrite it",
		DescribeTarget(holds), DescribeTarget(previous))
}

// haltReason is the Reason of a rollout halted by node's error.
func haltReason(node, errText string) string {
	return fmt.Sprintf("node/%s: %s", node, errText)
}

// Live returns a copy of r with each node's phase brought up to date from
// its Node (NextPhase), what was observed of each node, and whether any
// phase changed. get returns nil for a node that does not exist; such a
// node is Skipped. now stamps the phases that changed.
func Live(r *Rollout, get func(name string) (*corev1.Node, error), now metav1.MicroTime) (*Rollout, map[string]Observed, bool, error) {
	observed, _, err := observeNodes(r, get, Observe)
	if err != nil {
		return nil, nil, false, err
	}
	r, changed := recordPhases(r, observed, now)
	return r, observed, changed, nil
}

// observeNodes reads each node of r with get and observes it against its
// target with observe. It returns what was observed of each node, and the
// nodes as read; get returns nil for a node that does not exist, which is
// in neither map. A node that observe fails on is observed with the error.
func observeNodes(r *Rollout, get func(name string) (*corev1.Node, error), observe func(*corev1.Node, *corev1.NodeConfigSource, *source.Pin) (Observed, error)) (map[string]Observed, map[string]*corev1.Node, error) {
	observed := make(map[string]Observed, len(r.Spec.Nodes))
	nodes := make(map[string]*corev1.Node, len(r.Spec.Nodes))
	for _, name := range r.Spec.Nodes {
		node, err := get(name)
		if err != nil {
			return nil, nil, fmt.Errorf("get node %q: %w", name, err)
		}
		if node == nil {
			continue
		}
		target, pin := r.Spec.Target(name)
		o, err := observe(node, target, pin)
		if err != nil {
			o.Error = err.Error()
		}
		observed[name], nodes[name] = o, node
	}
	return observed, nodes, nil
}

// recordPhases returns a copy of r with each node's phase brought up to
// date from what was observed of it (NextPhase), and whether any phase
// changed. A node's record is r's, when r holds one (a rollout whose status
// was derived in this pass), else its mark's when the mark names r (record),
// else Waiting. A node absent from observed does not exist: it is Skipped.
// now stamps the phases that changed.
func recordPhases(r *Rollout, observed map[string]Observed, now metav1.MicroTime) (*Rollout, bool) {
	r = r.DeepCopy()
	if r.Status.Nodes == nil {
		r.Status.Nodes = map[string]NodeStatus{}
	}
	changed := false
	for _, name := range r.Spec.Nodes {
		o, exists := observed[name]
		rec, ok := r.Status.Nodes[name]
		if !ok {
			rec = record(r, o.Mark)
		}
		if !exists {
			if !rec.Phase.Finished() && rec.Phase != Failed {
				rec.Phase, rec.Error, rec.Finished = Skipped, "node not found", &now
				r.Status.Nodes[name] = rec
				changed = true
			}
			continue
		}
		phase, msg := NextPhase(rec, o)
		if ok && phase == rec.Phase && msg == rec.Error {
			continue
		}
		rec.Phase, rec.Error = phase, msg
		switch phase {
		case InProgress:
			if rec.Started == nil {
				rec.Started = &now
			}
		case Succeeded, Skipped, Failed:
			if rec.Finished == nil {
				rec.Finished = &now
			}
		}
		if phase != Waiting || ok {
			r.Status.Nodes[name] = rec
			changed = true
		}
	}
	return r, changed
}

// record is the record of a node whose mark is m: in progress, with the
// assignment it held before, when m names r; else Waiting. NextPhase then
// tells whether it is done.
func record(r *Rollout, m *Mark) NodeStatus {
	if !m.Owns(r) {
		return NodeStatus{Phase: Waiting}
	}
	started := m.Started
	return NodeStatus{Phase: InProgress, Previous: m.Previous, PreviousPin: m.PreviousPin, Cordoned: m.Cordoned, Marked: true, Started: &started}
}
