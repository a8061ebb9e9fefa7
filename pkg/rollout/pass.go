// A pass: read the rollout and its nodes, decide (decide.go), carry the
// decision out in the order the invariants ask (execute; starting a node is
// in start.go), and report what changed.

package rollout

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// pass looks at every node of the rollout once and acts on it: it reads
// the rollout and its nodes, decides what to do (decide, which holds the
// rules), and carries the decision out (execute). Read-only, it reports
// each node's phase and acts on nothing.
func (e *engine) pass(ctx context.Context) (finished bool, err error) {
	if err := e.refresh(ctx); err != nil {
		return true, err
	}
	now := e.opts.Clock.Now()
	observed, nodes, err := observeNodes(e.cur, e.getNode, e.observations.observe)
	if err != nil {
		return true, err
	}
	if e.opts.ReadOnly {
		r, _ := recordPhases(e.cur, observed, metav1.NewMicroTime(now))
		r.Status.State = r.State()
		return e.follow(r, observed)
	}
	if ok, err := e.takeState(ctx, observed, now); !ok || err != nil {
		return err != nil, err
	}
	if e.cur.Status.State != Running {
		if e.cur.Status.State == Done {
			return true, nil
		}
		return true, StateError(e.cur)
	}
	d, err := decide(e.cur, observed, nodes, e.assigned, !e.unqueued, now)
	if err != nil {
		return true, err
	}
	return e.execute(ctx, d, observed, nodes, now)
}

// getNode returns the node named name as the informer last saw it; nil
// when it does not exist.
func (e *engine) getNode(name string) (*corev1.Node, error) {
	node, err := e.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return node, err
}

// execute carries d out, in the order the invariants ask (docs/design/rollout.md,
// "Invariants"): a Final rollout (halted, or done once its drained nodes
// are uncordoned) is written and ends the pass; otherwise the nodes are
// uncordoned, the dequeued nodes assigned (the rollout as read recorded
// them), the rollout is written with every node it starts recorded
// InProgress, and only then are the other nodes of d.Assign drained and
// assigned. A write that loses to another client's ends the pass; the next
// one decides again on fresh state.
//
// Phases that only follow the carrier (d.Recorded: Done, Skipped,
// InProgress seen on a node someone else assigned) are written lazily,
// with the next write that must happen: any client derives them again from
// the nodes.
func (e *engine) execute(ctx context.Context, d Decision, observed map[string]Observed, nodes map[string]*corev1.Node, now time.Time) (bool, error) {
	for _, name := range d.Uncordon {
		if err := e.opts.Drainer.Uncordon(ctx, name); err != nil {
			return true, err
		}
	}
	if d.Final {
		return e.finish(ctx, d.Rollout, observed)
	}
	e.wake = d.Wake
	began := e.opts.Clock.Now()
	var first, rest []string
	for _, name := range d.Assign {
		if slices.Contains(d.Dequeue, name) {
			first = append(first, name)
		} else {
			rest = append(rest, name)
		}
	}
	if len(first) > 0 && e.isStale() {
		// Another client wrote the rollout since this pass read it: the
		// operator may have paused or aborted it. Look again first.
		e.poke()
		return false, nil
	}
	if name, err := e.startNodes(ctx, d.Rollout, first, nodes); err != nil {
		return e.halt(ctx, d.Rollout, name, err, now, observed)
	}
	dequeued := e.opts.Clock.Now()
	if d.Write {
		ok, err := e.write(ctx, d.Rollout)
		if err != nil || !ok {
			return err != nil, err
		}
		e.checkQueued(ctx, d.Queue)
	} else if d.Recorded {
		// Keep the lazy phases, with their times, for the next write; the
		// resourceVersion stays the one read.
		e.cur = d.Rollout
	}
	if d.Write || d.Recorded {
		e.notify(d.Rollout, observed)
	}

	wrote := e.opts.Clock.Now()
	name, err := e.startNodes(ctx, e.cur, rest, nodes)
	if len(d.Assign) > 0 {
		klog.FromContext(ctx).V(4).Info("Started nodes", "rollout", e.cur.Name, "nodes", len(d.Assign), "dequeued", len(first),
			"decide", began.Sub(now), "dequeue", dequeued.Sub(began), "write", wrote.Sub(dequeued), "start", e.opts.Clock.Since(wrote))
	}
	if err != nil {
		return e.halt(ctx, e.cur, name, err, now, observed)
	}
	return false, nil
}

// halt writes r halted on node's failure to start, err.
func (e *engine) halt(ctx context.Context, r *Rollout, node string, err error, now time.Time, observed map[string]Observed) (bool, error) {
	stamp := metav1.NewMicroTime(now)
	r = r.DeepCopy()
	rec := r.NodeStatus(node)
	rec.Phase, rec.Error, rec.Finished = Failed, err.Error(), &stamp
	r.Status.Nodes[node] = rec
	r.Status.State, r.Status.Reason = Halted, haltReason(node, rec.Error)
	return e.finish(ctx, r, observed)
}

// takeState records the state the rollout's spec asks for (Rollout.State)
// when its status does not show it yet: the operator paused, resumed or
// aborted it, or no driver has looked at it. The same write records each
// node's phase as observed, and the queued nodes this client assigned in
// progress, so that a pause or abort that came while it assigned them
// leaves them recorded. It reports false when another client wrote the
// rollout first; the pass is then redone on fresh state.
func (e *engine) takeState(ctx context.Context, observed map[string]Observed, now time.Time) (bool, error) {
	want := e.cur.State()
	if want == e.cur.Status.State {
		return true, nil
	}
	stamp := metav1.NewMicroTime(now)
	r, _ := recordPhases(e.cur, observed, stamp)
	recordAssigned(r, e.assigned, stamp)
	r.Status.State, r.Status.Reason = want, ""
	if want == Aborted {
		r.Status.Reason = "aborted (spec.aborted)"
		if e.cur.Status.State == Halted {
			r.Status.Reason += " after it halted: " + e.cur.Status.Reason
		}
	}
	return e.write(ctx, r)
}

// samePhases reports whether a and b show the same state and node phases.
func samePhases(a, b *Rollout) bool {
	if a.Status.State != b.Status.State || a.Status.Reason != b.Status.Reason || a.Status.Wave != b.Status.Wave {
		return false
	}
	for _, n := range b.Spec.Nodes {
		x, y := a.NodeStatus(n), b.NodeStatus(n)
		if x.Phase != y.Phase || x.Error != y.Error || x.Cordoned != y.Cordoned {
			return false
		}
	}
	return true
}

// follow reports r, with its nodes' phases as observed, when it changed
// since the last report; it ends the watch once the rollout is final.
func (e *engine) follow(r *Rollout, observed map[string]Observed) (bool, error) {
	if e.last == nil || !samePhases(e.last, r) {
		e.last = r
		if e.opts.OnChange != nil {
			e.opts.OnChange(r.DeepCopy(), observed)
		}
	}
	if r.Status.State.Terminal() {
		return true, StateError(r)
	}
	return false, nil
}

// finish writes r in a final state and returns what Run returns.
func (e *engine) finish(ctx context.Context, r *Rollout, observed map[string]Observed) (bool, error) {
	ok, err := e.write(ctx, r)
	if err != nil {
		return true, err
	}
	if !ok {
		return false, nil // lost a race: look again
	}
	e.notify(e.cur, observed)
	return true, StateError(e.cur)
}

func (e *engine) notify(r *Rollout, observed map[string]Observed) {
	if e.opts.OnChange != nil {
		e.opts.OnChange(r.DeepCopy(), observed)
	}
}

// checkQueued turns the queue off for the rest of the run when the rollout
// as written does not hold the nodes queued (d.Queue) that the write
// asked for: the cluster's CRD predates the field, and the apiserver drops
// it. Each pass would otherwise write the queue again, to no effect.
func (e *engine) checkQueued(ctx context.Context, queued []string) {
	if len(queued) == 0 || slices.ContainsFunc(queued, func(n string) bool { return e.cur.NodeStatus(n).Queued }) {
		return
	}
	e.unqueued = true
	klog.FromContext(ctx).Info("The cluster's NodeConfigRollout CRD drops status.nodes[].queued: starting each node after a write of the rollout, without a queue; apply deploy/crds.yaml to update it",
		"rollout", e.cur.Name)
}
