package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/kubectl-dkc/dkc/pkg/checkpoint"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/pkg/status"
)

// errNotSynced means the assigned ConfigMap's informer has not listed yet;
// its first sync or list error queues the node again.
var errNotSynced = errors.New("configmap informer not synced")

// configMapGetter returns the ConfigMap ns/name, a NotFound error when it
// does not exist, a *listError when it cannot be listed, or errNotSynced.
type configMapGetter func(ns, name string) (*corev1.ConfigMap, error)

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
func (a *Agent) sync(ctx context.Context, node *corev1.Node, getConfigMap configMapGetter) (time.Duration, error) {
	st, err := a.state()
	if err != nil {
		return 0, err
	}
	defer a.gc(ctx)

	src, carrier, err := source.Assigned(node)
	if err == nil {
		err = source.ValidateSource(src)
	}
	a.judging = nil
	if err == nil && src != nil {
		// An unreadable pin is reported below, and judges nothing.
		a.judging, _ = source.PinOf(node)
	}
	if err != nil {
		msg := status.SyncErrorPrefix + err.Error()
		if !errors.Is(err, source.ErrAllNilSubfields) {
			msg = status.SyncErrorPrefix + status.InternalError + ": " + err.Error()
		}
		return 0, a.publish(ctx, node, a.failedReport(statusCarrier(carrier), st.Assigned, st, &configError{reason: ReasonFailed, msg: msg}))
	}
	if src == nil {
		return 0, a.reset(ctx, node, st)
	}
	c := statusCarrier(carrier)
	cmName := src.ConfigMap.Namespace + "/" + src.ConfigMap.Name
	cm, err := getConfigMap(src.ConfigMap.Namespace, src.ConfigMap.Name)
	var lerr *listError
	switch {
	case errors.Is(err, errNotSynced):
		return 0, nil
	case errors.As(err, &lerr):
		return 0, a.downloadFailure(ctx, node, c, st, downloadError(lerr.detail()))
	case apierrors.IsNotFound(err):
		return 0, a.downloadFailure(ctx, node, c, st, downloadError("configmap "+cmName+" not found"))
	case err != nil:
		return 0, fmt.Errorf("get configmap %s: %w", cmName, err)
	}
	a.downloadFailed = ""
	want := src.DeepCopy()
	want.ConfigMap.UID = cm.UID
	want.ConfigMap.ResourceVersion = cm.ResourceVersion
	pin, err := source.PinOf(node)
	if err != nil {
		msg := status.SyncErrorPrefix + status.InternalError + ": " + err.Error()
		return 0, a.publish(ctx, node, a.failedReport(c, want, st, &configError{reason: ReasonFailed, msg: msg}))
	}
	as := assignment{src: want, pin: pin, cm: cm}
	// A config that failed its checks stays refused until the ConfigMap or
	// the pin changes.
	if a.refused != nil && source.Equal(a.refused.src, want) && a.refused.pin.Equal(pin) {
		return 0, a.publish(ctx, node, a.failedReport(c, want, st, a.refused.err))
	}
	if as.payload, err = a.pinned(as); err != nil {
		var cerr *configError
		if !errors.As(err, &cerr) {
			return 0, err
		}
		return 0, a.refuse(ctx, node, c, as, st, cerr)
	}
	a.warnIgnoredAnnotation(ctx, node, cm)
	var requeue time.Duration
	if st.Assigned != nil && source.Equal(st.Assigned, want) {
		requeue, err = a.settle(ctx, node, c, st, as)
	} else {
		requeue, err = a.apply(ctx, node, c, as, st)
	}
	var cerr *configError
	if err != nil && ctx.Err() == nil && !errors.As(err, &cerr) {
		// The status must not keep claiming what a failed step meant to
		// do: report what the kubelet's config holds now. (A configError
		// was reported where it arose.)
		a.reportObserved(ctx, node, c, want, err)
	}
	return requeue, err
}

// reportObserved publishes the record's status with active as observed, and
// err, after a sync failed half-way.
func (a *Agent) reportObserved(ctx context.Context, node *corev1.Node, c source.Carrier, assigned *corev1.NodeConfigSource, err error) {
	st, serr := a.state()
	if serr != nil {
		return
	}
	msg := status.SyncErrorPrefix + status.InternalError + ": " + err.Error()
	if e := st.AssignedError(); e != "" && source.Equal(st.Assigned, assigned) {
		msg = e + "; " + msg
	}
	r := report{carrier: c, status: a.observedStatus(st, assigned, a.observe(st), msg), reason: ReasonFailed, message: msg}
	if perr := a.publish(ctx, node, r); perr != nil {
		klog.FromContext(ctx).Error(perr, "Could not report the failure")
	}
}

// downloadFailure reports that the assigned ConfigMap cannot be downloaded,
// with the kubelet and the store untouched. A new error is counted and
// recorded as an Event; the same error again (the informer retries with
// backoff and queues the node on each failure) only keeps the status. The
// informer's first successful list queues the node again, so a later RBAC
// grant or the ConfigMap's creation converges without a restart.
func (a *Agent) downloadFailure(ctx context.Context, node *corev1.Node, c source.Carrier, st checkpoint.State, cerr *configError) error {
	r := a.failedReport(c, st.Assigned, st, cerr)
	if cerr.msg != a.downloadFailed {
		klog.FromContext(ctx).Info("Cannot download the assigned config; the kubelet is untouched", "err", cerr.msg)
		a.Metrics.Applies.WithLabelValues(ResultFailed).Inc()
		r.event = ReasonFailed
	}
	if err := a.publish(ctx, node, r); err != nil {
		return err
	}
	a.downloadFailed = cerr.msg
	return nil
}

// failedReport reports cerr for the assignment assigned, with the kubelet
// on what its config file holds.
func (a *Agent) failedReport(c source.Carrier, assigned *corev1.NodeConfigSource, st checkpoint.State, cerr *configError) report {
	return report{
		carrier: c,
		status:  a.observedStatus(st, assigned, a.observe(st), cerr.msg),
		reason:  cerr.reason,
		message: cerr.msg,
	}
}

// refuse reports a config that failed its checks, or whose bytes are not
// the ones its assigner pinned, and remembers it, so that it is not checked
// (and reported as an Event) again until the ConfigMap or the pin changes.
func (a *Agent) refuse(ctx context.Context, node *corev1.Node, c source.Carrier, as assignment, st checkpoint.State, cerr *configError) error {
	want := as.src
	r := a.failedReport(c, want, st, cerr)
	if cerr.reason != ReasonRefused && cerr.reason != ReasonPinMismatch {
		// Not the config's fault: report and retry.
		a.Metrics.Applies.WithLabelValues(ResultFailed).Inc()
		_ = a.publish(ctx, node, r)
		return cerr
	}
	klog.FromContext(ctx).Info("Refused config; the kubelet is untouched", "reason", cerr.reason, "err", cerr.msg)
	a.Metrics.Applies.WithLabelValues(ResultRefused).Inc()
	a.refused = &refusal{src: want, pin: as.pin.DeepCopy(), err: cerr}
	r.event = cerr.reason
	r.history = &source.HistoryEntry{Source: want, Result: source.ResultRefused, Message: cerr.msg}
	return a.publish(ctx, node, r)
}

// settle handles an assignment that is already recorded. The kubelet's
// config file wins over the record: a config the agent wrote that is not the
// target is repaired through the restart and the health gate, bytes the
// agent never wrote are drift; then a config in trial is verified once after
// the agent started, the trial ends when it is due, and the status is
// reported.
func (a *Agent) settle(ctx context.Context, node *corev1.Node, c source.Carrier, st checkpoint.State, as assignment) (time.Duration, error) {
	// A lost checkpoint of the assignment comes back from its ConfigMap
	// (same uid and resourceVersion, so the same bytes, which passed their
	// checks when they were applied): without it the agent could not
	// recognise its own config in the file. Saving an intact checkpoint
	// writes nothing.
	if err := a.checkpoint(as); err != nil {
		return 0, err
	}
	obs := a.observe(st)
	if obs.err != nil {
		return 0, obs.err
	}
	if obs.drift {
		return a.drift(ctx, node, c, st, obs, as)
	}
	a.drifted = ""
	target := st.Target()
	if !source.Equal(obs.source, target) {
		logger := klog.FromContext(ctx)
		logger.Info("The kubelet's config is not the one the agent recorded; repairing", "file", describe(obs.source), "want", describe(target))
		if st.Failed() {
			return 0, a.restoreLastKnownGood(ctx, node, c, st, a.Clock.Now(), false)
		}
		return a.apply(ctx, node, c, as, st)
	}
	if st.Failed() {
		return 0, a.publish(ctx, node, a.rolledBackReport(c, st, obs))
	}
	verified := false
	if a.verify != nil && !source.Equal(st.LastKnownGood, st.Assigned) {
		// The agent started during this config's trial, perhaps killed
		// between a restart and its health gate: gate it now.
		since := *a.verify
		a.verify = nil
		klog.FromContext(ctx).Info("Verifying the kubelet's health on the config in trial", "assigned", describe(st.Assigned))
		err := a.probe(ctx, obs.effective, since, nil)
		if err == nil {
			err = a.awaitPods(ctx, st.Baseline, since)
		}
		if err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			return 0, a.rollback(ctx, node, c, st.Assigned, a.Clock.Now(), err)
		}
		verified = true
	}
	a.verify = nil
	if !verified && !source.Equal(st.LastKnownGood, st.Assigned) {
		// In trial: the node must stay as fine as before the restart. (A
		// sync that just verified the kubelet's health has checked more,
		// and its node predates that check: the next sync checks again.)
		if err := a.checkTrial(ctx, node, st.Baseline); err != nil {
			return 0, a.rollback(ctx, node, c, st.Assigned, a.Clock.Now(), err)
		}
	}
	requeue, st, err := a.trial(ctx, st)
	if err != nil {
		return 0, err
	}
	return requeue, a.publish(ctx, node, a.okReport(c, st, obs))
}

// okReport is the report of a kubelet that runs st's assignment.
func (a *Agent) okReport(c source.Carrier, st checkpoint.State, obs observation) report {
	r := report{
		carrier: c,
		status:  a.observedStatus(st, st.Assigned, obs, ""),
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
// (observe). The condition says Verifying until the gate ends, in Trial or
// Applied, or in RolledBack. A failure to publish is only logged: the
// gate's end reports again.
func (a *Agent) reportRunning(ctx context.Context, node *corev1.Node, c source.Carrier, want *corev1.NodeConfigSource) {
	logger := klog.FromContext(ctx)
	st, err := a.state()
	if err != nil {
		logger.Error(err, "Could not report the config the kubelet runs")
		return
	}
	obs := a.observe(st)
	if obs.err != nil || obs.drift || !source.Equal(obs.source, want) || !source.Equal(st.Assigned, want) {
		return
	}
	r := report{
		carrier: c,
		status:  a.observedStatus(st, st.Assigned, obs, ""),
		reason:  ReasonVerifying,
		message: fmt.Sprintf("kubelet runs %s (its configz shows it); the health gate waits for Ready from the restarted kubelet, then for the pods that were Ready before", describe(want)),
	}
	if err := a.publish(ctx, node, r); err != nil {
		logger.Error(err, "Could not report the config the kubelet runs; the health gate goes on")
	}
}

// rolledBackReport is the report of a kubelet back on the last-known-good
// config after the assigned one failed.
func (a *Agent) rolledBackReport(c source.Carrier, st checkpoint.State, obs observation) report {
	return report{
		carrier: c,
		status:  a.observedStatus(st, st.Assigned, obs, st.Error),
		reason:  ReasonRolledBack,
		message: st.Error,
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
