package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/kubectl-dkc/dkc/pkg/kubelet"
	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/pkg/status"
)

// The state files the kubelet's CPU and memory managers keep in its root
// dir; a policy change needs them removed while the kubelet is stopped.
const (
	cpuManagerStateFile    = "cpu_manager_state"
	memoryManagerStateFile = "memory_manager_state"
)

// errNotSynced means the assigned ConfigMap's informer has not listed yet;
// its first sync or list error queues the node again.
var errNotSynced = errors.New("configmap informer not synced")

// configMapGetter returns the ConfigMap ns/name, a NotFound error when it
// does not exist, a *listError when it cannot be listed, or errNotSynced.
type configMapGetter func(ns, name string) (*corev1.ConfigMap, error)

// stored is what the checkpoint store says about the node.
type stored struct {
	assigned, lastKnownGood *corev1.NodeConfigSource
	lastError               string
	assignedAt              time.Time
	hasAssignedAt           bool
}

// active is the config the kubelet runs: the assigned one, or the
// last-known-good one when the assigned one was recorded as failed.
func (s stored) active() *corev1.NodeConfigSource {
	if s.lastError != "" {
		return s.lastKnownGood
	}
	return s.assigned
}

// settledLocal means dkc has nothing on the kubelet: no assignment and
// the local config as last-known-good.
func (s stored) settledLocal() bool {
	return s.assigned == nil && s.lastKnownGood == nil && s.lastError == ""
}

func (a *Agent) stored() (stored, error) {
	var s stored
	var err error
	if s.assigned, err = a.Store.Assigned(); err != nil {
		return s, err
	}
	if s.lastKnownGood, err = a.Store.LastKnownGood(); err != nil {
		return s, err
	}
	if s.lastError, err = a.Store.LastError(); err != nil {
		return s, err
	}
	s.assignedAt, s.hasAssignedAt, err = a.Store.AssignedAt()
	return s, err
}

// sync brings the kubelet to node's assignment and reports the result on
// node. It returns when to sync again to end a trial (0: not needed), and an
// error for the work queue to retry with backoff.
func (a *Agent) sync(ctx context.Context, node *corev1.Node, getConfigMap configMapGetter) (time.Duration, error) {
	st, err := a.stored()
	if err != nil {
		return 0, fmt.Errorf("read checkpoint store: %w", err)
	}
	defer a.gc(ctx)

	src, carrier, err := source.Assigned(node)
	if err == nil {
		err = source.ValidateSource(src)
	}
	if err != nil {
		msg := status.SyncErrorPrefix + err.Error()
		if !errors.Is(err, source.ErrAllNilSubfields) {
			msg = status.SyncErrorPrefix + status.InternalError + ": " + err.Error()
		}
		return 0, a.publish(ctx, node, a.failedReport(statusCarrier(carrier), st.assigned, st, &configError{reason: ReasonFailed, msg: msg}))
	}
	if src == nil {
		return 0, a.reset(ctx, node, st)
	}
	cmName := src.ConfigMap.Namespace + "/" + src.ConfigMap.Name
	cm, err := getConfigMap(src.ConfigMap.Namespace, src.ConfigMap.Name)
	var lerr *listError
	switch {
	case errors.Is(err, errNotSynced):
		return 0, nil
	case errors.As(err, &lerr):
		return 0, a.downloadFailure(ctx, node, statusCarrier(carrier), st, downloadError(lerr.detail()))
	case apierrors.IsNotFound(err):
		return 0, a.downloadFailure(ctx, node, statusCarrier(carrier), st, downloadError("configmap "+cmName+" not found"))
	case err != nil:
		return 0, fmt.Errorf("get configmap %s: %w", cmName, err)
	}
	a.downloadFailed = ""
	want := src.DeepCopy()
	want.ConfigMap.UID = cm.UID
	want.ConfigMap.ResourceVersion = cm.ResourceVersion
	if st.assigned != nil && source.Equal(st.assigned, want) {
		return a.settle(ctx, node, statusCarrier(carrier), st)
	}
	return a.apply(ctx, node, statusCarrier(carrier), want, cm, st)
}

// downloadFailure reports that the assigned ConfigMap cannot be downloaded,
// with the kubelet and the store untouched. A new error is counted and
// recorded as an Event; the same error again (the informer retries with
// backoff and queues the node on each failure) only keeps the status. The
// informer's first successful list queues the node again, so a later RBAC
// grant or the ConfigMap's creation converges without a restart.
func (a *Agent) downloadFailure(ctx context.Context, node *corev1.Node, c source.Carrier, st stored, cerr *configError) error {
	r := a.failedReport(c, st.assigned, st, cerr)
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
// still on what the store says it runs.
func (a *Agent) failedReport(c source.Carrier, assigned *corev1.NodeConfigSource, st stored, cerr *configError) report {
	return report{
		carrier: c,
		status:  &corev1.NodeConfigStatus{Assigned: assigned, Active: st.active(), LastKnownGood: st.lastKnownGood, Error: cerr.msg},
		reason:  cerr.reason,
		message: cerr.msg,
	}
}

// apply checks a new assignment and, when it passes, commits it to the store
// and the kubelet, restarts the kubelet and gates on its health, rolling back
// to the last-known-good config on failure. The steps run in an order that
// leaves the store and the kubelet's config consistent wherever a crash stops
// them: checkpoint, check, meta/assigned, kubelet config, restart, probe.
func (a *Agent) apply(ctx context.Context, node *corev1.Node, c source.Carrier, want *corev1.NodeConfigSource, cm *corev1.ConfigMap, st stored) (time.Duration, error) {
	logger := klog.FromContext(ctx).WithValues("assigned", describe(want))
	ctx = klog.NewContext(ctx, logger)
	cmName := cm.Namespace + "/" + cm.Name

	// A config that failed its checks stays refused until it changes.
	if a.refused != nil && source.Equal(a.refused.src, want) {
		return 0, a.publish(ctx, node, a.failedReport(c, want, st, a.refused.err))
	}
	began := a.Clock.Now()

	payload, ok := cm.Data[want.ConfigMap.KubeletConfigKey]
	var raw []byte
	if ok {
		raw = []byte(payload)
	} else if b, ok := cm.BinaryData[want.ConfigMap.KubeletConfigKey]; ok {
		raw = b
	} else {
		return 0, a.refuse(ctx, node, c, want, st, loadError(fmt.Errorf("key %q not found in ConfigMap %s", want.ConfigMap.KubeletConfigKey, cmName)))
	}
	if err := a.Store.SaveConfigMap(cm); err != nil {
		a.Metrics.Applies.WithLabelValues(ResultFailed).Inc()
		_ = a.publish(ctx, node, a.failedReport(c, want, st, internalError(fmt.Errorf("checkpoint: %w", err))))
		return 0, fmt.Errorf("checkpoint %s: %w", describe(want), err)
	}

	current, err := a.Writer.Effective()
	if err != nil {
		return 0, fmt.Errorf("read kubelet config: %w", err)
	}
	checkBegan := a.Clock.Now()
	cerr := a.check(raw, current, cm.Annotations[source.AllowUnsafeAnnotation], cmName)
	a.Metrics.PhaseDuration.WithLabelValues(PhaseValidate).Observe(a.Clock.Since(checkBegan).Seconds())
	if cerr != nil {
		return 0, a.refuse(ctx, node, c, want, st, cerr)
	}
	a.refused = nil
	a.verify = nil // this apply gates on the kubelet's health itself

	// Commit: from here on the store names want, so a restarted agent puts
	// want on the kubelet even if it dies before writing it.
	if err := a.Store.SetLastError(""); err != nil {
		return 0, fmt.Errorf("clear last error: %w", err)
	}
	if err := a.Store.SetAssigned(want); err != nil {
		return 0, fmt.Errorf("record assignment: %w", err)
	}
	logger.Info("Applying config")
	restarted, _, err := a.activate(ctx, raw, current)
	if err != nil && ctx.Err() != nil {
		return 0, ctx.Err() // shutting down: the next start verifies
	}
	if err != nil {
		return 0, a.rollback(ctx, node, c, want, began, err)
	}
	a.Metrics.Applies.WithLabelValues(ResultApplied).Inc()
	a.Metrics.ApplyDuration.Observe(a.Clock.Since(began).Seconds())
	msg := fmt.Sprintf("kubelet runs %s", describe(want))
	if restarted {
		msg += fmt.Sprintf("; restarted and healthy after %s", a.Clock.Since(began).Round(time.Millisecond))
	} else {
		msg += "; no restart needed"
	}
	logger.Info("Applied config", "restarted", restarted, "duration", a.Clock.Since(began))
	st, err = a.stored()
	if err != nil {
		return 0, fmt.Errorf("read checkpoint store: %w", err)
	}
	requeue, err := a.trial(ctx, st)
	if err != nil {
		return 0, err
	}
	r := a.okReport(c, st)
	r.event, r.eventMessage = ReasonApplied, msg
	return requeue, a.publish(ctx, node, r)
}

// refuse reports a config that failed its checks and remembers it, so that
// it is not checked (and reported as an Event) again until it changes.
func (a *Agent) refuse(ctx context.Context, node *corev1.Node, c source.Carrier, want *corev1.NodeConfigSource, st stored, cerr *configError) error {
	r := a.failedReport(c, want, st, cerr)
	if cerr.reason != ReasonRefused {
		// Not the config's fault: report and retry.
		a.Metrics.Applies.WithLabelValues(ResultFailed).Inc()
		_ = a.publish(ctx, node, r)
		return cerr
	}
	klog.FromContext(ctx).Info("Refused config; the kubelet is untouched", "err", cerr.msg)
	a.Metrics.Applies.WithLabelValues(ResultRefused).Inc()
	a.refused = &refusal{src: want, err: cerr}
	r.event = ReasonRefused
	return a.publish(ctx, node, r)
}

// okReport is the report of a kubelet that runs st's assignment.
func (a *Agent) okReport(c source.Carrier, st stored) report {
	r := report{
		carrier: c,
		status:  &corev1.NodeConfigStatus{Assigned: st.assigned, Active: st.assigned, LastKnownGood: st.lastKnownGood},
		reason:  ReasonApplied,
		message: fmt.Sprintf("kubelet runs %s, the last-known-good config", describe(st.assigned)),
	}
	if !source.Equal(st.lastKnownGood, st.assigned) {
		r.reason = ReasonTrial
		r.message = fmt.Sprintf("kubelet runs %s; it becomes last-known-good after %s", describe(st.assigned), a.TrialDuration)
	}
	return r
}

// settle handles an assignment that is already committed: report a
// recorded failure, verify the kubelet once after the agent started, and
// end the trial when it is due.
func (a *Agent) settle(ctx context.Context, node *corev1.Node, c source.Carrier, st stored) (time.Duration, error) {
	if st.lastError != "" {
		return 0, a.publish(ctx, node, report{
			carrier: c,
			status:  &corev1.NodeConfigStatus{Assigned: st.assigned, Active: st.lastKnownGood, LastKnownGood: st.lastKnownGood, Error: st.lastError},
			reason:  ReasonRolledBack,
			message: st.lastError,
		})
	}
	if a.verify != nil && !source.Equal(st.lastKnownGood, st.assigned) {
		// The agent started during this config's trial, perhaps killed
		// between a restart and its health gate: gate it now.
		since := *a.verify
		a.verify = nil
		logger := klog.FromContext(ctx).WithValues("assigned", describe(st.assigned))
		logger.Info("Verifying the kubelet's health on the config in trial")
		effective, err := a.Writer.Effective()
		if err != nil {
			return 0, fmt.Errorf("read kubelet config: %w", err)
		}
		if err := a.probe(ctx, effective, since); err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			return 0, a.rollback(ctx, node, c, st.assigned, a.Clock.Now(), err)
		}
	}
	a.verify = nil
	requeue, err := a.trial(ctx, st)
	if err != nil {
		return 0, err
	}
	if st, err = a.stored(); err != nil {
		return 0, fmt.Errorf("read checkpoint store: %w", err)
	}
	return requeue, a.publish(ctx, node, a.okReport(c, st))
}

// trial promotes the assigned config to last-known-good once it has run for
// TrialDuration since it was assigned, and otherwise says how long is left.
// The clock is meta/assigned-at, which survives agent and kubelet restarts.
func (a *Agent) trial(ctx context.Context, st stored) (time.Duration, error) {
	if st.lastError != "" || source.Equal(st.lastKnownGood, st.assigned) {
		return 0, nil
	}
	at := st.assignedAt
	if !st.hasAssignedAt {
		at = a.Clock.Now() // a store a kubelet wrote: start the trial now
	}
	if left := a.TrialDuration - a.Clock.Since(at); left > 0 {
		return left, nil
	}
	if err := a.Store.SetLastKnownGood(st.assigned); err != nil {
		return 0, fmt.Errorf("record last-known-good: %w", err)
	}
	klog.FromContext(ctx).Info("Promoted config to last-known-good", "config", describe(st.assigned), "trial", a.TrialDuration)
	return 0, nil
}

// rollback records why want failed and puts the kubelet back on the
// last-known-good config, restarting and probing it.
func (a *Agent) rollback(ctx context.Context, node *corev1.Node, c source.Carrier, want *corev1.NodeConfigSource, began time.Time, cause error) error {
	logger := klog.FromContext(ctx)
	rbBegan := a.Clock.Now()
	st, err := a.stored()
	if err != nil {
		return fmt.Errorf("read checkpoint store: %w", err)
	}
	lkg := st.lastKnownGood
	msg := fmt.Sprintf("%s: kubelet failed the health gate on %s, rolled back to %s: %v", status.ValidateError, describe(want), describe(lkg), cause)
	logger.Info("Rolling back to the last-known-good config", "lastKnownGood", describe(lkg), "err", cause)
	// Recorded first: a restarted agent then puts the last-known-good
	// config back on the kubelet rather than the failed one.
	if err := a.Store.SetLastError(msg); err != nil {
		return fmt.Errorf("record last error: %w", err)
	}
	var payload []byte
	if lkg != nil {
		if payload, err = a.Store.LoadKey(lkg); err != nil {
			return fmt.Errorf("load last-known-good checkpoint: %w", err)
		}
	}
	current, err := a.Writer.Effective()
	if err != nil {
		return fmt.Errorf("read kubelet config: %w", err)
	}
	if _, _, err := a.activate(ctx, payload, current); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		msg += fmt.Sprintf("; the last-known-good config failed too: %v", err)
		logger.Error(err, "The last-known-good config failed the health gate too")
		if err := a.Store.SetLastError(msg); err != nil {
			return fmt.Errorf("record last error: %w", err)
		}
	}
	a.Metrics.PhaseDuration.WithLabelValues(PhaseRollback).Observe(a.Clock.Since(rbBegan).Seconds())
	a.Metrics.Rollbacks.Inc()
	a.Metrics.Applies.WithLabelValues(ResultRolledBack).Inc()
	a.Metrics.ApplyDuration.Observe(a.Clock.Since(began).Seconds())
	return a.publish(ctx, node, report{
		carrier: c,
		status:  &corev1.NodeConfigStatus{Assigned: want, Active: lkg, LastKnownGood: lkg, Error: msg},
		reason:  ReasonRolledBack,
		message: msg,
		event:   ReasonRolledBack,
	})
}

// reset puts the node back on its local config when the assignment is gone:
// store first (so a restarted agent restores too), then the kubelet, then the
// status is cleared.
func (a *Agent) reset(ctx context.Context, node *corev1.Node, st stored) error {
	a.refused = nil
	a.verify = nil
	a.downloadFailed = ""
	logger := klog.FromContext(ctx)
	changed := !st.settledLocal()
	restarted := false
	message := "assignment removed; kubelet runs its local config"
	if changed {
		logger.Info("Assignment removed; restoring the local config")
		if err := a.Store.SetLastError(""); err != nil {
			return fmt.Errorf("clear last error: %w", err)
		}
		if err := a.Store.SetAssigned(nil); err != nil {
			return fmt.Errorf("record assignment: %w", err)
		}
		current, err := a.Writer.Effective()
		if err != nil {
			return fmt.Errorf("read kubelet config: %w", err)
		}
		restarted, _, err = a.activate(ctx, nil, current)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// Nothing to fall back to: report and retry.
			_ = a.publish(ctx, node, report{keepStatus: true, reason: ReasonFailed, message: "restore local config: " + err.Error()})
			return fmt.Errorf("restore local config: %w", err)
		}
		if err := a.Store.SetLastKnownGood(nil); err != nil {
			return fmt.Errorf("record last-known-good: %w", err)
		}
		a.Metrics.Resets.Inc()
	}
	r := report{status: nil}
	if changed || findCondition(node.Status.Conditions) != nil {
		r.reason, r.message = ReasonReset, message
		if changed {
			r.event = ReasonReset
		}
	}
	if restarted {
		logger.Info("Restored the local config", "restarted", restarted)
	}
	return a.publish(ctx, node, r)
}

// activate makes payload (nil: the local config) the kubelet's config and,
// if that changed the effective config, restarts the kubelet and gates on
// its health. before is the effective config before the write. A CPU or
// memory manager policy change removes the manager's state file while the
// kubelet is stopped.
func (a *Agent) activate(ctx context.Context, payload, before []byte) (restarted bool, after []byte, err error) {
	logger := klog.FromContext(ctx)
	began := a.Clock.Now()
	if payload == nil {
		err = a.Writer.Restore()
	} else {
		err = a.Writer.Apply(payload)
	}
	if err != nil {
		return false, nil, fmt.Errorf("write kubelet config: %w", err)
	}
	if after, err = a.Writer.Effective(); err != nil {
		return false, nil, fmt.Errorf("read kubelet config: %w", err)
	}
	a.Metrics.PhaseDuration.WithLabelValues(PhaseWrite).Observe(a.Clock.Since(began).Seconds())
	if sameJSON(before, after) {
		logger.V(2).Info("Effective kubelet config unchanged; no restart")
		return false, after, nil
	}
	since, err := a.restart(ctx, before, after)
	if err != nil {
		return true, after, err
	}
	return true, after, a.probe(ctx, after, since)
}

// restart restarts the kubelet for a change from before to after, and
// returns when the restart began.
func (a *Agent) restart(ctx context.Context, before, after []byte) (time.Time, error) {
	logger := klog.FromContext(ctx)
	began := a.Clock.Now()
	defer func() { a.Metrics.PhaseDuration.WithLabelValues(PhaseRestart).Observe(a.Clock.Since(began).Seconds()) }()
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

// probe runs the health gate with HealthTimeout.
func (a *Agent) probe(ctx context.Context, effective []byte, since time.Time) error {
	began := a.Clock.Now()
	defer func() { a.Metrics.PhaseDuration.WithLabelValues(PhaseProbe).Observe(a.Clock.Since(began).Seconds()) }()
	ctx, cancel := context.WithTimeout(ctx, a.HealthTimeout)
	defer cancel()
	if err := a.Prober.Probe(ctx, kubelet.Expectation{Config: effective, Since: since}); err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	return nil
}

// gc removes the checkpoints that neither meta/assigned nor
// meta/last-known-good name.
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

// refusal is a config that failed its checks.
type refusal struct {
	src *corev1.NodeConfigSource
	err *configError
}
