// A pass: read the rollout and its nodes, decide (decide.go), carry the
// decision out in the order the invariants ask (execute; starting a node is
// in start.go), and report what changed.

package rollout

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// ErrLegacy means the rollout keeps each node's part in its own status, as
// dkc did before the nodes carried it (Mark): this version does not drive
// it.
var ErrLegacy = errors.New("the rollout was started by an earlier dkc, which kept each node's progress in the rollout object")

// pass looks at every node of the rollout once and acts on it: it reads
// the rollout and its nodes, decides what to do (decide, which holds the
// rules), and carries the decision out (execute). Read-only, or while
// another client holds the rollout's Lease, it reports each node's phase
// and acts on nothing. lead is the context of this driver's tenure of the
// Lease; nil when it follows.
func (e *engine) pass(ctx, lead context.Context) (finished bool, err error) {
	if err := e.refresh(ctx); err != nil {
		return true, err
	}
	now := e.opts.Clock.Now()
	view, err := e.resolve()
	if err != nil {
		return true, err
	}
	observed, nodes, err := observeNodes(view, e.getNode, e.observe)
	if err != nil {
		return true, err
	}
	if lead == nil {
		r, _ := recordPhases(view, observed, metav1.NewMicroTime(now))
		r.Status.State = r.State()
		return e.follow(r, observed)
	}
	if len(e.cur.Status.LegacyNodes) > 0 && !e.cur.State().Terminal() {
		return true, fmt.Errorf("rollout %q: %w: finish it with the dkc that started it, or abort it (kubectl dkc rollout abort %s) and start it again", e.cur.Name, ErrLegacy, e.cur.Name)
	}
	took := e.cur.State() != e.cur.Status.State
	if ok, err := e.takeState(lead, view, observed, now); !ok || err != nil {
		return e.unlessTenureEnded(lead, ctx, err != nil, err)
	}
	if took {
		// takeState wrote the rollout: decide on what it wrote, whose
		// resourceVersion the pass's writes go over.
		if view, err = e.resolve(); err != nil {
			return true, err
		}
		if observed, nodes, err = observeNodes(view, e.getNode, e.observe); err != nil {
			return true, err
		}
	}
	if e.cur.Status.State != Running {
		if e.cur.Status.State == Done {
			return true, nil
		}
		return true, StateError(e.cur)
	}
	d, err := decide(view, observed, nodes, e.assigned, now, e.alerts.alerts(lead, e.cur.Spec.PauseOnAlerts, now))
	if err != nil {
		return true, err
	}
	finished, err = e.execute(lead, d, observed, nodes, now)
	return e.unlessTenureEnded(lead, ctx, finished, err)
}

// unlessTenureEnded returns what a pass that acted under the Lease's
// tenure lead returned, unless the tenure ended meanwhile (and ctx did
// not): what the pass did not finish is left to the next holder, and the
// next pass follows.
func (e *engine) unlessTenureEnded(lead, ctx context.Context, finished bool, err error) (bool, error) {
	if lead.Err() != nil && ctx.Err() == nil {
		e.poke()
		return false, nil
	}
	return finished, err
}

// observe is Observe, from the cache of observations, with the mark this
// driver wrote on a node when the node cache does not show it yet.
func (e *engine) observe(node *corev1.Node, target *corev1.NodeConfigSource, pin *source.Pin) (Observed, error) {
	o, err := e.observations.observe(node, target, pin)
	e.mu.Lock()
	defer e.mu.Unlock()
	if m := e.marks[node.Name]; m != nil && !o.Mark.Owns(e.cur) {
		o.Mark = m
	}
	return o, err
}

// resolve returns the rollout with its nodes, as the node cache shows them
// (Resolve).
func (e *engine) resolve() (*Rollout, error) {
	if Lists(e.cur) {
		return e.cur, nil
	}
	nodes, err := e.nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return Resolve(e.cur, nodes, e.markOf)
}

// markOf is MarkOf, decoded once per version of the node, with the mark
// this driver wrote on a node when the node cache does not show it yet.
func (e *engine) markOf(node *corev1.Node) (*Mark, error) {
	e.mu.Lock()
	written := e.marks[node.Name]
	e.mu.Unlock()
	seen, ok := e.seenMarks[node.Name]
	if !ok || node.ResourceVersion == "" || seen.resourceVersion != node.ResourceVersion {
		seen.resourceVersion = node.ResourceVersion
		seen.mark, seen.err = MarkOf(node)
		if e.seenMarks == nil {
			e.seenMarks = map[string]seenMark{}
		}
		e.seenMarks[node.Name] = seen
	}
	if written != nil && !seen.mark.Owns(e.cur) {
		return written, nil
	}
	return seen.mark, seen.err
}

type seenMark struct {
	resourceVersion string
	mark            *Mark
	err             error
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
// "Invariants"): the nodes that passed their gate are uncordoned; a Final
// rollout (halted, or done) is written and ends the pass; otherwise the
// rollout is written when its status changed in a way the nodes cannot
// tell (d.Write), or when its counts changed and the last write is
// Options.StatusInterval old; then the nodes of d.Assign are marked,
// drained where they must be, and assigned. A write that loses to another
// client's (a pause or abort) ends the pass; the next one decides again
// on fresh state.
func (e *engine) execute(ctx context.Context, d Decision, observed map[string]Observed, nodes map[string]*corev1.Node, now time.Time) (bool, error) {
	for _, name := range d.Uncordon {
		if err := e.uncordon(ctx, d.Rollout, name, nodes[name]); err != nil {
			return true, err
		}
	}
	r := d.Rollout
	r.Status.Counts = Count(r)
	if d.Final {
		return e.finish(ctx, r, observed)
	}
	e.wake = d.Wake
	if r.Status.State == Running && isNotice(r.Status.Reason) {
		// A driver stopped while a node waited (notice.go).
		r.Status.Reason = ""
		d.Write = true
	}
	if d.Write || (r.Status.Counts != e.cur.Status.Counts && e.opts.Clock.Since(e.written) >= e.opts.StatusInterval) {
		ok, err := e.write(ctx, r)
		if err != nil || !ok {
			return err != nil, err
		}
		// The notices and a halt below write over the version stored.
		r.ResourceVersion = e.cur.ResourceVersion
		e.notify(r, observed)
	} else if r.Status.Counts != e.reported {
		e.notify(r, observed)
	}
	began := e.opts.Clock.Now()
	if len(d.Assign) > 0 {
		e.notices.begin(r)
	}
	name, err := e.startNodes(ctx, r, d.Start, d.Assign, nodes)
	if written := e.notices.end(); written != nil {
		// A node waited, and the driver said why (notice.go): write over
		// that, and clear it when no node failed.
		r.ResourceVersion = written.ResourceVersion
		e.wrote(written)
		if err == nil {
			if _, werr := e.write(ctx, r); werr != nil {
				return true, werr
			}
		}
	}
	if len(d.Assign) > 0 {
		klog.FromContext(ctx).V(4).Info("Started nodes", "rollout", r.Name, "nodes", len(d.Assign), "decide", began.Sub(now), "start", e.opts.Clock.Since(began))
	}
	if err != nil {
		if ctx.Err() != nil {
			return false, nil // the tenure ended: no node failed
		}
		return e.halt(ctx, r, name, err, now, observed)
	}
	if len(d.Assign) > 0 {
		e.poke() // count the nodes started against the budget again
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
	r.Status.Failures = []Failure{{Node: node, Error: rec.Error}}
	r.Status.Counts = Count(r)
	return e.finish(ctx, r, observed)
}

// takeState records the state the rollout's spec asks for (Rollout.State)
// when its status does not show it yet: the operator paused, resumed or
// aborted it, or no driver has looked at it. It reports false when another
// client wrote the rollout first; the pass is then redone on fresh state.
func (e *engine) takeState(ctx context.Context, view *Rollout, observed map[string]Observed, now time.Time) (bool, error) {
	want := e.cur.State()
	if want == e.cur.Status.State {
		return true, nil
	}
	r, _ := recordPhases(view, observed, metav1.NewMicroTime(now))
	r.Status.State, r.Status.Reason = want, ""
	r.Status.Counts = Count(r)
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
	// What Run returns: the rollout as stored, with its nodes (Resolve)
	// and their phases.
	e.cur = e.cur.DeepCopy()
	e.cur.Spec, e.cur.Status.Nodes = r.Spec, r.Status.Nodes
	e.notify(e.cur, observed)
	return true, StateError(e.cur)
}

func (e *engine) notify(r *Rollout, observed map[string]Observed) {
	e.reported = r.Status.Counts
	if e.opts.OnChange != nil {
		e.opts.OnChange(r.DeepCopy(), observed)
	}
}
