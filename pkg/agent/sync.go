package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/kubectl-dkc/dkc/pkg/apis/dkc/v1alpha1"
	"github.com/kubectl-dkc/dkc/pkg/checkpoint"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// errNotSynced means the assigned ConfigMap's informer has not listed yet;
// its first sync or list error queues the node again.
var errNotSynced = errors.New("configmap informer not synced")

// configMapGetter returns the ConfigMap ns/name, a NotFound error when it
// does not exist, a *listError when it cannot be listed, or errNotSynced.
// Unless fresh, the answer may come from a cache and be older than the
// ConfigMap is; fresh reads it from the apiserver's storage.
type configMapGetter func(ns, name string, fresh bool) (*corev1.ConfigMap, error)

// state returns the checkpoint store's record.
func (a *Agent) state() (checkpoint.State, error) {
	st, _, err := a.Store.State()
	if err != nil {
		return st, fmt.Errorf("read checkpoint store: %w", err)
	}
	return st, nil
}

// setState records st in the checkpoint store.
func (a *Agent) setState(st checkpoint.State) error {
	if err := a.Store.SetState(st); err != nil {
		return fmt.Errorf("record agent state: %w", err)
	}
	return nil
}

// sync brings the kubelet to node's assignment and reports the result on
// node. It returns when to sync again to end a trial (0: not needed), and an
// error for the work queue to retry with backoff. Whatever it returns, the
// status it leaves names as active the config whose bytes the kubelet's
// config holds.
//
// It observes (the record, the assignment, the ConfigMap, the kubelet's
// config, the agent's memory), decides (decide, a pure function of what it
// observed), acts (the step decided, which returns what to report instead
// of publishing it), and reports once: one patch of the Node's status, its
// Events after it. The one other report is the Verifying one that an
// apply's health gate publishes while it waits (reportRunning).
func (a *Agent) sync(ctx context.Context, node *corev1.Node, getConfigMap configMapGetter) (time.Duration, error) {
	o, err := a.observe(node, getConfigMap)
	if err != nil {
		return 0, err
	}
	defer a.gc(ctx)
	a.judging = o.judging()
	d := decide(o)
	out := a.act(ctx, node, o, d)
	if err := a.report(ctx, node, o, d, out); err != nil {
		return out.requeue, err
	}
	requeue := out.requeue
	if retry, err := a.publishFlags(ctx, node); err != nil {
		// The flags help assigners; they fail no sync.
		klog.FromContext(ctx).Info("Could not record the kubelet's flags on the node", "err", err)
		if retry > 0 && (requeue <= 0 || requeue > retry) {
			requeue = retry
		}
	}
	return requeue, nil
}

// outcome is what a step leaves to report: the report (nil: nothing of its
// own), when to sync again, and the sync's error.
type outcome struct {
	report  *report
	requeue time.Duration
	err     error
}

// act carries out d: the memory it changes, then its step.
func (a *Agent) act(ctx context.Context, node *corev1.Node, o *observed, d decision) outcome {
	if d.memo.forgetAssignment {
		a.refused, a.verify, a.downloadFailed = nil, nil, ""
	}
	if d.memo.forgetDownload {
		a.downloadFailed = ""
	}
	if d.checkpoint {
		// A lost checkpoint of the assignment comes back from its
		// ConfigMap (same uid and resourceVersion, so the same bytes):
		// without it the agent could not recognise its own config in
		// the file after this sync. Saving an intact checkpoint writes
		// nothing.
		if err := a.checkpoint(o.as); err != nil {
			return outcome{err: err}
		}
	}
	a.remember(ctx, d)
	switch d.step {
	case stepReport:
		r := d.report
		return outcome{report: &r, err: d.err}
	case stepReset:
		return a.reset(ctx, o, d.report)
	case stepApply:
		return a.apply(ctx, node, o)
	case stepRestore:
		return a.restoreLastKnownGood(ctx, o.carrier, o.st, a.Clock.Now(), false)
	case stepSettle:
		return a.settle(ctx, node, o, d)
	}
	return outcome{err: d.err}
}

// remember logs d and makes the changes of the agent's memory and metrics
// that it decided.
func (a *Agent) remember(ctx context.Context, d decision) {
	for _, l := range d.logs {
		klog.FromContext(ctx).Info(l.msg, l.kv...)
	}
	if d.memo.forgetDrift {
		a.drifted = ""
	}
	if d.memo.refuse != nil {
		a.refused = d.memo.refuse
		if d.memo.refuse.err.reason == ReasonPinMismatch {
			a.Metrics.PinMismatches.Inc()
		}
	}
	if d.memo.count != "" {
		a.Metrics.Applies.WithLabelValues(d.memo.count).Inc()
	}
	if d.memo.drift {
		a.Metrics.Drifts.Inc()
	}
}

// report publishes, once, what the sync did: the step's report, after
// d.first; or, when a step failed without a report of its own, what the
// kubelet's config holds now, with the error. It returns the sync's error:
// the step's, else the publish's.
func (a *Agent) report(ctx context.Context, node *corev1.Node, o *observed, d decision, out outcome) error {
	r := out.report
	var cerr *configError
	if r == nil && d.reportFailure && out.err != nil && ctx.Err() == nil && !errors.As(out.err, &cerr) {
		r = a.failureReport(o, out.err)
	}
	if d.first != nil {
		if r == nil {
			r = d.first
		} else {
			merged := r.after(*d.first)
			r = &merged
		}
	}
	if r == nil {
		return out.err
	}
	if err := a.publish(ctx, node, *r); err != nil {
		if out.err == nil {
			return err
		}
		klog.FromContext(ctx).Error(err, "Could not report the failure")
		return out.err
	}
	if d.memo.downloadFailed != "" {
		a.downloadFailed = d.memo.downloadFailed
	}
	if d.memo.drifted != "" {
		a.drifted = d.memo.drifted
	}
	if d.memo.warned != "" {
		a.warnedAnnotation = d.memo.warned
	}
	if out.err == nil && untaints(*r) && source.Pending(node) {
		if err := source.RemoveStartupTaint(ctx, a.Client.Nodes(), a.NodeName, nil); err != nil {
			return err
		}
		klog.FromContext(ctx).Info("Removed the startup taint: the assigned config is active and passed its health gate", "taint", source.StartupTaint, "config", describe(o.as.src))
	}
	return out.err
}

// untaints reports whether r, published, lets the node take workloads:
// the kubelet runs the assigned config, which passed its health gate (in
// trial or last-known-good). Then the startup taint that the node
// registered with (source.StartupTaint) goes.
func untaints(r report) bool {
	return r.reason == ReasonApplied || r.reason == ReasonTrial
}

// failureReport is the report of the record's status with active as
// observed now, and err, after a step failed half-way; nil when the record
// cannot be read.
func (a *Agent) failureReport(o *observed, err error) *report {
	st, serr := a.state()
	if serr != nil {
		return nil
	}
	assigned := o.as.src
	msg := v1alpha1.SyncErrorPrefix + v1alpha1.InternalError + ": " + err.Error()
	if e := st.AssignedError(); e != "" && source.Equal(st.Assigned, assigned) {
		msg = e + "; " + msg
	}
	return &report{carrier: o.carrier, status: observedStatus(st, assigned, a.observeFile(st, nil), msg, a.onDrift()), reason: ReasonFailed, message: msg}
}

// okReport is the report of a kubelet that runs st's assignment.
func (a *Agent) okReport(c source.Carrier, st checkpoint.State, obs observation) report {
	r := report{
		carrier: c,
		status:  observedStatus(st, st.Assigned, obs, "", a.onDrift()),
		reason:  ReasonApplied,
		message: fmt.Sprintf("kubelet runs %s, the last-known-good config", describe(st.Assigned)),
	}
	if !source.Equal(st.LastKnownGood, st.Assigned) {
		r.reason = ReasonTrial
		r.message = fmt.Sprintf("kubelet runs %s; it becomes last-known-good after %s", describe(st.Assigned), a.TrialDuration)
	}
	return r
}

// reportRunning publishes, while the health gate of an apply of want waits
// for the restarted kubelet's Ready, that the kubelet runs want: the gate saw
// its configz show want, and the kubelet's config file holds want's bytes
// (observeFile). The condition says Verifying until the gate ends, in Trial
// or Applied, or in RolledBack. It is the one report besides the one at the
// end of each sync. A failure to publish is only logged: the gate's end
// reports again.
func (a *Agent) reportRunning(ctx context.Context, node *corev1.Node, c source.Carrier, want *corev1.NodeConfigSource) {
	logger := klog.FromContext(ctx)
	st, err := a.state()
	if err != nil {
		logger.Error(err, "Could not report the config the kubelet runs")
		return
	}
	obs := a.observeFile(st, nil)
	if obs.err != nil || obs.drift || !source.Equal(obs.source, want) || !source.Equal(st.Assigned, want) {
		return
	}
	r := report{
		carrier: c,
		status:  observedStatus(st, st.Assigned, obs, "", a.onDrift()),
		reason:  ReasonVerifying,
		message: fmt.Sprintf("kubelet runs %s (its configz shows it); the health gate waits for Ready from the restarted kubelet, then for the pods that were Ready before", describe(want)),
	}
	if err := a.publish(ctx, node, r); err != nil {
		logger.Error(err, "Could not report the config the kubelet runs; the health gate goes on")
	}
}

// gc removes the checkpoints that the record does not name.
func (a *Agent) gc(ctx context.Context) {
	removed, err := a.Store.GC()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Garbage collection of checkpoints failed")
		return
	}
	if len(removed) > 0 {
		klog.FromContext(ctx).V(2).Info("Removed unreferenced checkpoints", "dirs", removed)
	}
}

// refusal is a config that failed its checks, with the pin it was checked
// against.
type refusal struct {
	src *corev1.NodeConfigSource
	pin *source.Pin
	err *configError
}
