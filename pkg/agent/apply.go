package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/kubectl-dkc/dkc/pkg/atomicfile"
	"github.com/kubectl-dkc/dkc/pkg/kubelet"
	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
	"github.com/kubectl-dkc/dkc/pkg/nodehealth"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// The state files the kubelet's CPU and memory managers keep in its root
// dir; a policy change needs them removed while the kubelet is stopped.
const (
	cpuManagerStateFile    = "cpu_manager_state"
	memoryManagerStateFile = "memory_manager_state"
)

// apply checks the observed assignment and, when it passes, commits it to
// the store and the kubelet, restarts the kubelet and gates on its health,
// rolling back to the last-known-good config on failure. It returns what to
// report: the apply, the refusal or the rollback; a failure that is not the
// config's it returns without a report (sync reports what the kubelet's
// config holds).
//
// Invariant: the record names want as assigned, with a new trial start and
// no error of its own, in one atomic write (the commit) before the kubelet's
// config is touched; an error recorded for another config stays with that
// config. A crash anywhere leaves the record on the old assignment or the
// new one, never on a config that failed with its error dropped, and the
// kubelet's config on one the record names: startup and the next sync
// repair it towards the target.
func (a *Agent) apply(ctx context.Context, node *corev1.Node, o *observed) outcome {
	as, st, c := o.as, o.st, o.carrier
	want := as.src
	logger := klog.FromContext(ctx).WithValues("assigned", describe(want))
	ctx = klog.NewContext(ctx, logger)
	began := a.Clock.Now()

	current, err := a.Writer.Effective()
	if err != nil {
		return outcome{err: fmt.Errorf("read kubelet config: %w", err)}
	}
	// The pods bound to the node: what the config must leave room for,
	// and the baseline its health gate and trial hold the node to.
	pods, err := a.nodePods()
	var perr *configError
	switch {
	case errors.Is(err, errNotSynced):
		return outcome{} // the pod informer's first sync queues the node
	case errors.As(err, &perr):
		return a.refuse(ctx, o, perr)
	case err != nil:
		return outcome{err: err}
	}
	base := nodehealth.Take(node, pods, a.Clock.Now())
	checkBegan := a.Clock.Now()
	cerr := a.check(ctx, as.payload, current, as.pin.AllowUnsafe, a.nodeFacts(node, pods))
	a.Metrics.PhaseDuration.WithLabelValues(PhaseValidate).Observe(a.Clock.Since(checkBegan).Seconds())
	if cerr != nil {
		return a.refuse(ctx, o, cerr)
	}
	a.refused = nil
	// Only bytes that passed their checks reach the node's disk, and only
	// the assigned key's: the rest of the ConfigMap is not the assigner's.
	if err := a.checkpoint(as); err != nil {
		a.Metrics.Applies.WithLabelValues(ResultFailed).Inc()
		return outcome{err: err} // reported with what the kubelet's config holds
	}
	// The new-pod check judges the config only if a new pod runs on
	// the node as it is now (probepod.go).
	newPods, unjudged := a.probeBefore(ctx)
	if ctx.Err() != nil {
		return outcome{err: ctx.Err()}
	}

	// Commit: one write names want, with its trial start, so that a
	// restarted agent puts want on the kubelet even if this one dies
	// before writing it. This apply gates on the kubelet's health itself;
	// an apply undone below leaves the verification it replaced pending.
	prev, verify := st, a.verify
	a.verify = nil
	now := a.Clock.Now()
	st.Assigned, st.AssignedAt, st.Baseline = want, &now, &base
	if st.ErrorSource != nil && source.Equal(st.ErrorSource, want) {
		st.Error, st.ErrorSource = "", nil
	}
	if err := a.setState(st); err != nil {
		return outcome{err: err}
	}
	logger.Info("Applying config")
	// Once the restarted kubelet shows want in its configz, status names
	// want as active while the gate waits for its Ready.
	running := func() { a.reportRunning(ctx, node, c, want) }
	restarted, _, err := a.activate(ctx, want, as.payload, current, gating{kubelet: true, pods: &base, newPods: newPods}, running)
	if err != nil && ctx.Err() != nil {
		return outcome{err: ctx.Err()} // shutting down: the next start verifies
	}
	var werr *writeError
	if errors.As(err, &werr) {
		// Not the config's fault, and the kubelet still runs what it ran:
		// undo the commit, so that the next sync applies want again, and
		// let the work queue retry with backoff; sync reports it.
		logger.Error(err, "Could not write the kubelet's config; the kubelet is untouched, retrying")
		a.Metrics.Applies.WithLabelValues(ResultFailed).Inc()
		a.verify = verify
		if serr := a.setState(prev); serr != nil {
			return outcome{err: serr}
		}
		return outcome{err: err}
	}
	if err != nil {
		out := a.rollback(ctx, c, want, began, err)
		if out.report != nil {
			out.report.events = append(unjudged, out.report.events...)
		}
		return out
	}
	// The duration first: a scrape that sees the apply counted sees its
	// duration too.
	a.Metrics.ApplyDuration.Observe(a.Clock.Since(began).Seconds())
	a.Metrics.Applies.WithLabelValues(ResultApplied).Inc()
	msg := fmt.Sprintf("kubelet runs %s", describe(want))
	if restarted {
		msg += fmt.Sprintf("; restarted and healthy after %s", a.Clock.Since(began).Round(time.Millisecond))
	} else {
		msg += "; no restart needed"
	}
	logger.Info("Applied config", "restarted", restarted, "duration", a.Clock.Since(began))
	if st, err = a.state(); err != nil {
		return outcome{err: err}
	}
	requeue, st, err := a.trial(ctx, st)
	if err != nil {
		return outcome{err: err}
	}
	r := a.okReport(c, st, a.observeFile(st, nil))
	r.events = append(unjudged, event{reason: ReasonApplied, message: msg})
	r.history = []source.HistoryEntry{{Source: want, Result: source.ResultApplied, Message: msg}}
	return outcome{requeue: requeue, report: &r}
}

// refuse carries out the refusal of an assignment that failed a check of
// apply's (decideRefusal), touching nothing.
func (a *Agent) refuse(ctx context.Context, o *observed, cerr *configError) outcome {
	d := decideRefusal(o, cerr)
	a.remember(ctx, d)
	return outcome{report: &d.report, err: d.err}
}

// writeError is a failure to write the kubelet's config that left its
// effective config as it was (a read-only or full config directory): the
// kubelet was not restarted and the config is not at fault. The caller
// keeps the record as it was and retries; it never rolls back for it.
type writeError struct{ err error }

// Error names the directory rather than the random temporary the write
// created in it, so that the status reported on each retry is the same and
// patches the Node once, not on every retry.
func (e *writeError) Error() string {
	var pe *fs.PathError
	if errors.As(e.err, &pe) && strings.HasPrefix(filepath.Base(pe.Path), atomicfile.TempPrefix) {
		return fmt.Sprintf("write kubelet config in %s: %v", filepath.Dir(pe.Path), pe.Err)
	}
	return e.err.Error()
}

func (e *writeError) Unwrap() error { return e.err }

// activate makes payload, the config of src (nil: the local config), the
// kubelet's config, records src as the config last written, and, if that
// changed the effective config, restarts the kubelet and gates on its
// health as gate says. before is the effective config before the write. A CPU or
// memory manager policy change removes the manager's state file while the
// kubelet is stopped. Without a kubelet gate it returns when the restart
// began, for a later gate; running, if set, is the gate's Expectation.Running. A write
// that fails with the effective config still before returns a *writeError,
// with nothing recorded.
func (a *Agent) activate(ctx context.Context, src *corev1.NodeConfigSource, payload, before []byte, gate gating, running func()) (restarted bool, since time.Time, err error) {
	logger := klog.FromContext(ctx)
	began := a.Clock.Now()
	if payload == nil {
		err = a.Writer.Restore()
	} else {
		err = a.Writer.Apply(payload)
	}
	if err != nil {
		// The writer's error names the operation and the path.
		if now, rerr := a.Writer.Effective(); rerr == nil && sameJSON(before, now) {
			return false, since, &writeError{err: err}
		}
		return false, since, err
	}
	st, err := a.state()
	if err != nil {
		return false, since, err
	}
	if !source.Equal(st.Active, src) {
		st.Active = src
		if err := a.setState(st); err != nil {
			return false, since, err
		}
	}
	after, err := a.Writer.Effective()
	if err != nil {
		return false, since, fmt.Errorf("read kubelet config: %w", err)
	}
	a.Metrics.PhaseDuration.WithLabelValues(PhaseWrite).Observe(a.Clock.Since(began).Seconds())
	if sameJSON(before, after) {
		logger.V(2).Info("Effective kubelet config unchanged; no restart")
		return false, since, nil
	}
	since, err = a.restart(ctx, before, after)
	if err != nil || !gate.kubelet {
		return true, since, err
	}
	if err := a.probe(ctx, after, since, running); err != nil {
		return true, since, err
	}
	if err := a.awaitPods(ctx, gate.pods, since); err != nil || !gate.newPods {
		return true, since, err
	}
	return true, since, a.probeAfter(ctx)
}

// gating says how activate gates on the kubelet's health after a restart.
type gating struct {
	// kubelet gates on the kubelet's own checks (kubelet.Prober).
	kubelet bool
	// pods, when set, then holds the node's pods to this baseline
	// (awaitPods). A rollback or a reset does not: the config it puts
	// back is where the node is safest.
	pods *nodehealth.Baseline
	// newPods then runs the new-pod check (probeAfter): set when the
	// probe pod ran and turned Ready before the restart.
	newPods bool
}

// restart restarts the kubelet for a change from before to after, and
// returns when the restart began.
func (a *Agent) restart(ctx context.Context, before, after []byte) (time.Time, error) {
	logger := klog.FromContext(ctx)
	began := a.Clock.Now()
	defer func() { a.Metrics.PhaseDuration.WithLabelValues(PhaseRestart).Observe(a.Clock.Since(began).Seconds()) }()
	a.flagsRead = time.Time{} // the new kubelet may have been given other flags
	var cpu, memory bool
	oldCfg, err1 := decodeLenient(before)
	newCfg, err2 := decodeLenient(after)
	if err1 == nil && err2 == nil {
		cpu, memory = kubeletconfig.NeedsStateReset(oldCfg, newCfg)
	}
	if !cpu && !memory {
		logger.Info("Restarting the kubelet")
		if err := a.Restarter.Restart(ctx); err != nil {
			return began, err
		}
		return began, nil
	}
	logger.Info("Stopping the kubelet to remove resource manager state", "cpuManagerState", cpu, "memoryManagerState", memory)
	if err := a.Restarter.Stop(ctx); err != nil {
		return began, err
	}
	for _, f := range []struct {
		remove bool
		name   string
	}{{cpu, cpuManagerStateFile}, {memory, memoryManagerStateFile}} {
		if !f.remove {
			continue
		}
		path := filepath.Join(a.KubeletRootDir, f.name)
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			// Start the kubelet anyway; the health gate judges.
			logger.Error(err, "Could not remove resource manager state", "path", path)
		} else {
			logger.Info("Removed resource manager state", "path", path)
		}
	}
	return began, a.Restarter.Start(ctx)
}

// probe runs the health gate with HealthTimeout; running, if set, is called
// once the kubelet is seen running effective (kubelet.Expectation.Running).
func (a *Agent) probe(ctx context.Context, effective []byte, since time.Time, running func()) error {
	began := a.Clock.Now()
	defer func() { a.Metrics.PhaseDuration.WithLabelValues(PhaseProbe).Observe(a.Clock.Since(began).Seconds()) }()
	ctx, cancel := context.WithTimeout(ctx, a.HealthTimeout)
	defer cancel()
	if err := a.Prober.Probe(ctx, kubelet.Expectation{Config: effective, Since: since, Running: running}); err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	return nil
}
