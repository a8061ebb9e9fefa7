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

// rollback records why want failed and puts the kubelet back on the
// last-known-good config, restarting and probing it, and returns the report
// of the rollback.
//
// Invariant: the failure is recorded (error and the config it belongs to)
// before the kubelet's config is touched, so a restarted agent puts the
// last-known-good config back rather than the failed one. If the rollback
// stops half-way (the checkpoint cannot be loaded, the kubelet config cannot
// be read or written), the record still says "failed", the status names
// what the file holds, and the next sync (decideSettle) sees the file on the
// failed config and retries through restoreLastKnownGood.
func (a *Agent) rollback(ctx context.Context, c source.Carrier, want *corev1.NodeConfigSource, began time.Time, cause error) outcome {
	st, err := a.state()
	if err != nil {
		return outcome{err: err}
	}
	st.Error = fmt.Sprintf("%s: kubelet failed the health gate on %s, rolled back to %s: %v", v1alpha1.ValidateError, describe(want), describe(st.LastKnownGood), cause)
	st.ErrorSource, st.Baseline = want, nil
	klog.FromContext(ctx).Info("Rolling back to the last-known-good config", "lastKnownGood", describe(st.LastKnownGood), "err", cause)
	if err := a.setState(st); err != nil {
		return outcome{err: err}
	}
	return a.restoreLastKnownGood(ctx, c, st, began, true)
}

// restoreLastKnownGood puts the kubelet on st's last-known-good config after
// st's assigned config failed, and returns the report of it. first is the
// rollback that recorded the failure (counted, with an Event and a history
// entry); a retry after a rollback stopped half-way is not.
func (a *Agent) restoreLastKnownGood(ctx context.Context, c source.Carrier, st checkpoint.State, began time.Time, first bool) outcome {
	logger := klog.FromContext(ctx)
	rbBegan := a.Clock.Now()
	lkg := st.LastKnownGood
	payload, err := a.payload(lkg)
	if err != nil {
		return outcome{err: fmt.Errorf("load last-known-good checkpoint: %w", err)}
	}
	current, err := a.Writer.Effective()
	if err != nil {
		return outcome{err: fmt.Errorf("read kubelet config: %w", err)}
	}
	if _, _, err := a.activate(ctx, lkg, payload, current, gating{kubelet: true}, nil); err != nil {
		if ctx.Err() != nil {
			return outcome{err: ctx.Err()}
		}
		var werr *writeError
		if errors.As(err, &werr) {
			// The last-known-good config is not at fault: the kubelet
			// still runs the failed config, which sync reports; the
			// work queue retries.
			return outcome{err: err}
		}
		logger.Error(err, "The last-known-good config failed the health gate too")
		st.Error += fmt.Sprintf("; the last-known-good config failed too: %v", err)
		if err := a.setState(st); err != nil {
			return outcome{err: err}
		}
	}
	a.Metrics.PhaseDuration.WithLabelValues(PhaseRollback).Observe(a.Clock.Since(rbBegan).Seconds())
	r := rolledBackReport(c, st, a.observeFile(st, nil), a.onDrift())
	if first {
		a.Metrics.Rollbacks.Inc()
		a.Metrics.Applies.WithLabelValues(ResultRolledBack).Inc()
		a.Metrics.ApplyDuration.Observe(a.Clock.Since(began).Seconds())
		r.events = []event{{reason: ReasonRolledBack}}
		r.history = []source.HistoryEntry{{Source: st.Assigned, Result: source.ResultRolledBack, Message: st.Error}}
	}
	return outcome{report: &r}
}
