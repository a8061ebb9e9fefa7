package rollout

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubectl-dkc/dkc/pkg/apis/dkc/v1alpha1"
	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// Decision is what one pass over a rollout does, as decide works it out
// from what the pass read. The executor (engine.execute) carries it out in
// this order: uncordon, write the rollout when it must, start the nodes.
type Decision struct {
	// Rollout is the rollout as it is to be written: each node's phase
	// brought up to date from its observation (not stored: the nodes
	// carry it), and every change below.
	Rollout *Rollout
	// Write: Rollout's status holds what the nodes cannot tell (a wave
	// entered, a soak begun or broken, the reason no node starts), and is
	// stored before any node starts.
	Write bool
	// Final: Rollout is Halted or Done. It is written, and the pass ends.
	Final bool
	// Uncordon lists the drained nodes that passed their health gate, to
	// uncordon, with their marks.
	Uncordon []string
	// Start lists the nodes this pass starts, in rollout order: each is
	// marked, with the assignment it holds (to undo to), in the patch that
	// assigns it or, for a node to drain, that cordons it.
	Start []string
	// Assign lists the nodes in progress that do not hold their target
	// yet, in rollout order, to drain (where the rollout must) and assign:
	// the ones in Start, and any that a driver marked and did not assign
	// before it died.
	Assign []string
	// Wake is when the soak before the next wave ends, or, outside every
	// maintenance window, when the next one opens, or, while an alert
	// holds the rollout, when the driver asks its Alertmanager again,
	// whichever comes first; zero when none.
	Wake time.Time
}

// decide works out one pass over r, the rollout as read, at now. observed
// holds what each node's carrier, conditions and mark showed (a node absent
// from it does not exist), nodes the Nodes as read (for the assignment each
// held before the rollout starts it), and assigned the nodes this driver
// assigned already, which observed may not show yet. decide does no I/O.
//
// It keeps the rollout's invariants (docs/design/rollout.md, "Invariants"):
//   - halt before anything else: a failed node halts the rollout, and
//     nothing else is decided;
//   - a node is started by marking it, with the assignment to undo to, in
//     the patch that assigns or cordons it: no node is assigned by a
//     rollout without the record of it;
//   - the budget counts every node marked and not done, cordoned, or not
//     available, from the nodes themselves;
//   - a node is assigned only when it does not hold its target.
//
// The steps, in order: record each node's phase (NextPhase); halt on the
// first failed node; uncordon drained nodes that passed their health gate;
// finish when every node is done; enter the next wave once every earlier
// node is done and, with a soak, has stayed healthy that long; start the
// current wave's waiting nodes, in order, while the budget has room, unless
// the rollout is outside every maintenance window (windowOpen), or an alert
// holds it (alertsClear, from alerts, what the driver learnt of
// spec.pauseOnAlerts): then no node starts.
func decide(r *Rollout, observed map[string]Observed, nodes map[string]*corev1.Node, assigned map[string]bool, now time.Time, alerts Alerts) (Decision, error) {
	stamp := metav1.NewMicroTime(now)
	r, _ = recordPhases(r, observed, stamp)
	d := Decision{Rollout: r}

	var failed []Failure
	for _, name := range r.Spec.Nodes {
		if rec := r.NodeStatus(name); rec.Phase == Failed {
			failed = append(failed, Failure{Node: name, Error: rec.Error})
		}
	}
	if len(failed) > 0 {
		r.Status.State, r.Status.Reason = Halted, haltReason(failed[0].Node, failed[0].Error)
		r.Status.Failures = failed[:min(len(failed), MaxFailures)]
		d.Final = true
		return d, nil
	}

	for _, name := range r.Spec.Nodes {
		rec := r.NodeStatus(name)
		if rec.Cordoned && rec.Phase == InProgress && observed[name].Running && observed[name].Ready {
			d.Uncordon = append(d.Uncordon, name)
		}
	}

	if !slices.ContainsFunc(r.Spec.Nodes, func(n string) bool { return !r.NodeStatus(n).Phase.Finished() }) {
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
	if current <= r.Status.Wave && r.Status.SoakSince != nil {
		// A node of the waves entered is no longer done (it went
		// NotReady): the soak before the next wave starts again.
		r.Status.SoakSince = nil
		d.Write = true
	}

	// Outside every window, or while an alert fires, no node starts;
	// those under way finish.
	held := ""
	if open := windowOpen(&d, now) && alertsClear(&d, alerts); open && current <= r.Status.Wave {
		var err error
		if d.Start, err = start(r, waves[:r.Status.Wave+1], observed, nodes, stamp); err != nil {
			return Decision{}, err
		}
		if len(d.Start) == 0 {
			held = budgetHeld(r, waves[:r.Status.Wave+1], observed)
		}
	}
	switch {
	case held != "" && r.Status.Reason != held:
		r.Status.Reason = held
		d.Write = true
	case held == "" && strings.HasPrefix(r.Status.Reason, ReasonBudgetHeld+":"):
		r.Status.Reason = ""
		d.Write = true
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

// start records InProgress, in r, the waiting nodes of waves, in order,
// while the budget has room, with the assignment each holds now (to undo
// to) and whether it is to be drained, and returns them. A node in
// progress, cordoned, or not available (NotReady, or unschedulable) takes a
// slot, whether the rollout started it or not.
func start(r *Rollout, waves []Wave, observed map[string]Observed, nodes map[string]*corev1.Node, now metav1.MicroTime) ([]string, error) {
	budget := Budget(r.Spec.MaxUnavailable, len(r.Spec.Nodes))
	unavailable := 0
	for _, name := range r.Spec.Nodes {
		if rec := r.NodeStatus(name); rec.Phase == InProgress || unavailableAs(rec, observed, name) != "" {
			unavailable++
		}
	}
	var started []string
	for _, w := range waves {
		for _, name := range w.Nodes {
			if unavailable >= budget {
				return started, nil
			}
			rec := r.NodeStatus(name)
			if rec.Phase != Waiting {
				continue
			}
			prev, prevPin, err := held(nodes[name])
			if err != nil {
				return nil, err
			}
			if observed[name].Available() {
				unavailable++
			}
			rec.Phase, rec.Started, rec.Previous, rec.PreviousPin = InProgress, &now, prev, prevPin
			rec.Cordoned, rec.Marked = slices.Contains(r.Spec.Drain, name), true
			r.Status.Nodes[name] = rec
			started = append(started, name)
		}
	}
	return started, nil
}

// budgetHeld returns why no node of waves starts, when nothing of the
// rollout is in progress and nodes it did not start, unavailable (cordoned
// or NotReady), fill its budget: the rollout would wait for them for ever
// without saying so. It returns "" when a node is in progress or none
// waits. The reason names the first few of them and what to do.
func budgetHeld(r *Rollout, waves []Wave, observed map[string]Observed) string {
	if !slices.ContainsFunc(waves, func(w Wave) bool {
		return slices.ContainsFunc(w.Nodes, func(n string) bool { return r.NodeStatus(n).Phase == Waiting })
	}) {
		return ""
	}
	var held []string
	for _, name := range r.Spec.Nodes {
		rec := r.NodeStatus(name)
		if rec.Phase == InProgress {
			return "" // the budget holds the rollout's own nodes
		}
		if as := unavailableAs(rec, observed, name); as != "" {
			held = append(held, "node/"+name+" ("+as+")")
		}
	}
	budget := Budget(r.Spec.MaxUnavailable, len(r.Spec.Nodes))
	if len(held) == 0 || len(held) < budget {
		return ""
	}
	const named = 3
	list := strings.Join(held[:min(len(held), named)], ", ")
	if len(held) > named {
		list += fmt.Sprintf(" and %d more", len(held)-named)
	}
	verb, them := "is", "it"
	if len(held) > 1 {
		verb, them = "are", "them"
	}
	of := fmt.Sprint(budget)
	if r.Spec.MaxUnavailable.Type == intstr.String {
		of = fmt.Sprintf("%d (%s)", budget, r.Spec.MaxUnavailable.StrVal)
	}
	reason := fmt.Sprintf("%s: no node starts while %s %s unavailable, which the budget of %s counts: uncordon %s or make %s Ready, or start the rollout again with a larger budget",
		ReasonBudgetHeld, list, verb, of, them, them)
	return kubeletconfig.Shorten(reason, v1alpha1.MaxMessageBytes)
}

// unavailableAs says why the node named name, whose record is rec, takes a
// slot of the budget besides being in progress: "NotReady", or "cordoned"
// (unschedulable, or drained by the rollout); "" when it does not.
func unavailableAs(rec NodeStatus, observed map[string]Observed, name string) string {
	o, exists := observed[name]
	switch {
	case exists && !o.Ready:
		return "NotReady"
	case rec.Cordoned || (exists && !o.Schedulable):
		return "cordoned"
	}
	return ""
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
