package rollout

import (
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// Decision is what one pass over a rollout does, as decide works it out
// from what the pass read. The executor (engine.execute) carries it out in
// this order: uncordon, assign the dequeued nodes, write the rollout,
// assign the others.
type Decision struct {
	// Rollout is the rollout as it is to be written: each node's phase
	// brought up to date from its observation, and every change below.
	Rollout *Rollout
	// Recorded: a phase changed that the nodes' carriers tell, so that
	// any client derives it again. It may wait for the next write.
	Recorded bool
	// Write: Rollout holds what the carriers cannot tell (a node started
	// or queued, a wave entered, a soak begun or broken, a cordon lifted),
	// and must be stored before anything but Dequeue is done.
	Write bool
	// Final: Rollout is Halted or Done. It is written, and the pass ends.
	Final bool
	// Uncordon lists the drained nodes that passed their health gate, to
	// uncordon before Rollout, which records them uncordoned, is written.
	Uncordon []string
	// Start lists the nodes this pass records InProgress that the
	// rollout as read did not queue, in rollout order.
	Start []string
	// Dequeue lists the nodes this pass records InProgress that the
	// rollout as read queued, with the assignment each still holds: that
	// record fences them already, so they are assigned before Rollout is
	// written.
	Dequeue []string
	// Queue lists the nodes this pass queues, in rollout order.
	Queue []string
	// Assign lists the nodes recorded InProgress that do not hold their
	// target yet, in rollout order, to drain (where the rollout must) and
	// assign: the ones in Dequeue at once, the others once Rollout is
	// written (the ones in Start, and any that a client recorded and did
	// not assign before it died).
	Assign []string
	// Wake is when the soak before the next wave ends, or, outside every
	// maintenance window, when the next one opens, whichever comes first;
	// zero when neither.
	Wake time.Time
}

// decide works out one pass over r, the rollout as read, at now. observed
// holds what each node's carrier and conditions showed (a node absent from
// it does not exist), nodes the Nodes as read (for the assignment each
// held before the rollout starts it), and assigned the nodes this client
// assigned already, which observed may not show yet. With queueing false
// no node is queued (the cluster cannot store a queue). decide does no
// I/O.
//
// It keeps the rollout's invariants (docs/design/rollout.md, "Invariants"):
//   - halt before anything else: a failed node halts the rollout, and
//     nothing else is decided;
//   - record, then assign: a node is started by recording it InProgress,
//     or queued, with the assignment to undo to, in a write that comes
//     before its assignment: the queued nodes (Dequeue) were recorded by
//     an earlier write, the others by Rollout's;
//   - a node is assigned only when it does not hold its target.
//
// The steps, in order: record each node's phase (NextPhase); halt on the
// first failed node; uncordon drained nodes that passed their health gate;
// finish when every node is done; enter the next wave once every earlier
// node is done and, with a soak, has stayed healthy that long; start the
// current wave's waiting nodes, in order, while the budget has room, and
// queue the next ones (Queue), unless the rollout is outside every
// maintenance window (windowOpen): then no node starts or is queued.
func decide(r *Rollout, observed map[string]Observed, nodes map[string]*corev1.Node, assigned map[string]bool, queueing bool, now time.Time) (Decision, error) {
	stamp := metav1.NewMicroTime(now)
	r, recorded := recordPhases(r, observed, stamp)
	recorded = recordAssigned(r, assigned, stamp) || recorded
	d := Decision{Rollout: r, Recorded: recorded}

	for _, name := range r.Spec.Nodes {
		if rec := r.NodeStatus(name); rec.Phase == Failed {
			r.Status.State, r.Status.Reason = Halted, haltReason(name, rec.Error)
			d.Final = true
			return d, nil
		}
	}

	for _, name := range r.Spec.Nodes {
		rec := r.NodeStatus(name)
		if !rec.Cordoned || rec.Phase != Succeeded {
			continue
		}
		rec.Cordoned = false
		r.Status.Nodes[name] = rec
		d.Uncordon = append(d.Uncordon, name)
		d.Write = true
	}

	if !slices.ContainsFunc(r.Spec.Nodes, func(n string) bool {
		rec := r.NodeStatus(n)
		return !rec.Phase.Finished() || rec.Cordoned
	}) {
		r.Status.State, r.Status.Reason = Done, ""
		d.Final = true
		return d, nil
	}

	waves := Waves(&r.Spec)
	current := slices.IndexFunc(waves, func(w Wave) bool {
		return slices.ContainsFunc(w.Nodes, func(n string) bool { return !r.NodeStatus(n).Phase.Finished() })
	})
	if current > r.Status.Wave && enterWave(&d, waves[:current], observed, now) {
		r.Status.Wave, r.Status.SoakSince = current, nil
		d.Write = true
	}

	// Outside every window no node starts; those under way finish.
	if open := windowOpen(&d, now); open && current == r.Status.Wave {
		s, err := start(r, waves[current].Nodes, observed, nodes, queueing, stamp)
		if err != nil {
			return Decision{}, err
		}
		d.Start, d.Dequeue, d.Queue = s.started, s.dequeued, s.queued
		d.Write = d.Write || len(s.started) > 0 || len(s.queued) > 0
		d.Recorded = d.Recorded || len(s.dequeued) > 0
	}

	for _, name := range r.Spec.Nodes {
		o, exists := observed[name]
		if r.NodeStatus(name).Phase == InProgress && exists && !o.Assigned && !assigned[name] {
			d.Assign = append(d.Assign, name)
		}
	}
	return d, nil
}

// windowOpen reports whether d.Rollout's windows (spec.windows) let a node
// start at now. Outside them, it records why in status.reason
// (ReasonOutsideWindow, with the next window's start) and wakes the driver
// at that start, or at the end of a soak if sooner; inside them, it clears
// that reason.
func windowOpen(d *Decision, now time.Time) bool {
	r := d.Rollout
	outside := strings.HasPrefix(r.Status.Reason, ReasonOutsideWindow)
	if r.Spec.Windows.Open(now) {
		if outside {
			r.Status.Reason = ""
			d.Write = true
		}
		return true
	}
	if reason := OutsideWindowReason(r.Spec.Windows, now); r.Status.Reason != reason {
		r.Status.Reason = reason
		d.Write = true
	}
	if next := r.Spec.Windows.Next(now); !next.IsZero() && (d.Wake.IsZero() || next.Before(d.Wake)) {
		d.Wake = next
	}
	return false
}

// enterWave reports whether the rollout may enter the wave after done, the
// waves whose nodes are all done. Without a soak it may at once. With one,
// it may once every node of done has been Ready and running its target (or
// skipped) for the soak, without a break: enterWave starts the soak in
// d.Rollout, breaks it when a node is not, and sets d.Wake to its end.
func enterWave(d *Decision, done []Wave, observed map[string]Observed, now time.Time) bool {
	r := d.Rollout
	soak := r.Spec.Soak.Duration
	if soak <= 0 {
		return true
	}
	healthy := true
	for _, w := range done {
		for _, n := range w.Nodes {
			if o, ok := observed[n]; ok && !(o.Ready && (o.Running || r.NodeStatus(n).Phase == Skipped)) {
				healthy = false
			}
		}
	}
	switch {
	case !healthy:
		if r.Status.SoakSince != nil {
			r.Status.SoakSince = nil
			d.Write = true
		}
		return false
	case r.Status.SoakSince == nil:
		r.Status.SoakSince = &metav1.Time{Time: now}
		d.Write = true
		d.Wake = now.Add(soak)
		return false
	case now.Before(r.Status.SoakSince.Add(soak)):
		d.Wake = r.Status.SoakSince.Add(soak)
		return false
	}
	return true
}

// Queue is how many waiting nodes a rollout with budget keeps queued: a
// quarter of the budget, none below a budget of 4. A queued node is
// recorded, with the assignment it holds, before its turn, so that the
// client that sees a slot free starts it at once, and writes the rollout
// after, not before: the write is then off the path from one node's end to
// the next node's start. The budget holds across clients as it does
// without a queue: nodes start in rollout order, so two clients that see
// the same slots free start the same queued nodes.
func Queue(budget int) int { return budget / 4 }

// started is what start did to a wave's nodes.
type started struct {
	// started and dequeued are the nodes recorded InProgress: dequeued
	// the ones that were queued with the assignment they still hold.
	started, dequeued []string
	// queued are the nodes newly queued.
	queued []string
}

// start records InProgress, in r, the waiting nodes of wave, in order, while
// the budget has room, with the assignment each holds now (to undo to) and
// whether it is to be drained. A node in progress, cordoned, or not
// available (NotReady, or unschedulable) takes a slot, whether the rollout
// started it or not. It then tops the queue up (Queue) with the next
// waiting nodes, once half of it has gone: the queue stops at a node to be
// drained, which is recorded cordoned only when it starts.
func start(r *Rollout, wave []string, observed map[string]Observed, nodes map[string]*corev1.Node, queueing bool, now metav1.MicroTime) (started, error) {
	var s started
	budget := Budget(r.Spec.MaxUnavailable, len(r.Spec.Nodes))
	unavailable := 0
	for _, name := range r.Spec.Nodes {
		rec := r.NodeStatus(name)
		o, exists := observed[name]
		if rec.Phase == InProgress || rec.Cordoned || (exists && !o.Available()) {
			unavailable++
		}
	}
	var rest []string // the waiting nodes beyond the budget, in order
	for _, name := range wave {
		rec := r.NodeStatus(name)
		if rec.Phase != Waiting {
			continue
		}
		if unavailable >= budget {
			rest = append(rest, name)
			continue
		}
		prev, prevPin, err := held(nodes[name])
		if err != nil {
			return s, err
		}
		if observed[name].Available() {
			unavailable++
		}
		if rec.Queued && source.Equal(prev, rec.Previous) && prevPin.Equal(rec.PreviousPin) {
			s.dequeued = append(s.dequeued, name)
		} else {
			s.started = append(s.started, name)
		}
		rec.Phase, rec.Started, rec.Previous, rec.PreviousPin, rec.Queued = InProgress, &now, prev, prevPin, false
		rec.Cordoned = slices.Contains(r.Spec.Drain, name)
		r.Status.Nodes[name] = rec
	}

	// The queue is the first nodes of rest, up to the first to be drained.
	// It is topped up once half of it has gone; until then the rollout is
	// left as read, so that no node counts as queued before a write
	// records it so.
	size := 0
	if queueing {
		size = Queue(budget)
	}
	fresh := map[string]NodeStatus{} // the queue's nodes not queued with what they hold
	for i, name := range rest {
		if i >= size || slices.Contains(r.Spec.Drain, name) {
			break
		}
		rec := r.NodeStatus(name)
		prev, prevPin, err := held(nodes[name])
		if err != nil {
			return s, err
		}
		if rec.Queued && source.Equal(prev, rec.Previous) && prevPin.Equal(rec.PreviousPin) {
			continue
		}
		rec.Queued, rec.Previous, rec.PreviousPin = true, prev, prevPin
		fresh[name] = rec
		s.queued = append(s.queued, name)
	}
	if len(fresh) < (size+1)/2 {
		s.queued = nil
		return s, nil
	}
	maps.Copy(r.Status.Nodes, fresh)
	return s, nil
}

// recordAssigned records in progress, in r, the queued nodes that this
// client assigned (assigned) and that r shows waiting still: their Nodes
// may not show the assignment yet. It reports whether it changed r.
func recordAssigned(r *Rollout, assigned map[string]bool, now metav1.MicroTime) bool {
	changed := false
	for name := range assigned {
		rec := r.NodeStatus(name)
		if rec.Phase != Waiting || !rec.Queued {
			continue
		}
		rec.Phase, rec.Queued, rec.Started = InProgress, false, &now
		r.Status.Nodes[name] = rec
		changed = true
	}
	return changed
}

// held returns the assignment node holds, with its pin: what undo sends it
// back to once the rollout starts it.
func held(node *corev1.Node) (*corev1.NodeConfigSource, *source.Pin, error) {
	prev, _, err := source.Assigned(node)
	if err != nil || prev == nil {
		return nil, nil, err
	}
	pin, err := source.PinOf(node)
	return prev, pin, err
}
