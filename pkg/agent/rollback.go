package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/kubectl-dkc/dkc/pkg/checkpoint"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/pkg/status"
)

// rollback records why want failed and puts the kubelet back on the
// last-known-good config, restarting and probing it.
//
// Invariant: the failure is recorded (error and the config it belongs to)
// before the kubelet's config is touched, so a restarted agent puts the
// last-known-good config back rather than the failed one. If the rollback
// stops half-way (the checkpoint cannot be loaded, the kubelet config cannot
// be read or written), the record still says "failed", the status names
// what the file holds, and the next sync (settle) sees the file on the failed
// config and retries through restoreLastKnownGood.
func (a *Agent) rollback(ctx context.Context, node *corev1.Node, c source.Carrier, want *corev1.NodeConfigSource, began time.Time, cause error) error {
	st, err := a.state()
	if err != nil {
		return err
	}
	st.Error = fmt.Sprintf("%s: kubelet failed the health gate on %s, rolled back to %s: %v", status.ValidateError, describe(want), describe(st.LastKnownGood), cause)
	st.ErrorSource, st.Baseline = want, nil
	klog.FromContext(ctx).Info("Rolling back to the last-known-good config", "lastKnownGood", describe(st.LastKnownGood), "err", cause)
	if err := a.setState(st); err != nil {
		return err
	}
	return a.restoreLastKnownGood(ctx, node, c, st, began, true)
}

// restoreLastKnownGood puts the kubelet on st's last-known-good config after
// st's assigned config failed, and reports it. first is the rollback that
// recorded the failure (counted, with an Event and a history entry); a retry
// after a rollback stopped half-way is not.
func (a *Agent) restoreLastKnownGood(ctx context.Context, node *corev1.Node, c source.Carrier, st checkpoint.State, began time.Time, first bool) error {
	logger := klog.FromContext(ctx)
	rbBegan := a.Clock.Now()
	lkg := st.LastKnownGood
	payload, err := a.payload(lkg)
	if err != nil {
		return fmt.Errorf("load last-known-good checkpoint: %w", err)
	}
	current, err := a.Writer.Effective()
	if err != nil {
		return fmt.Errorf("read kubelet config: %w", err)
	}
	if _, _, err := a.activate(ctx, lkg, payload, current, gating{kubelet: true}, nil); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var werr *writeError
		if errors.As(err, &werr) {
			// The last-known-good config is not at fault: the kubelet
			// still runs the failed config, which sync reports; the
			// work queue retries.
			return err
		}
		logger.Error(err, "The last-known-good config failed the health gate too")
		st.Error += fmt.Sprintf("; the last-known-good config failed too: %v", err)
		if err := a.setState(st); err != nil {
			return err
		}
	}
	a.Metrics.PhaseDuration.WithLabelValues(PhaseRollback).Observe(a.Clock.Since(rbBegan).Seconds())
	r := a.rolledBackReport(c, st, a.observe(st))
	if first {
		a.Metrics.Rollbacks.Inc()
		a.Metrics.Applies.WithLabelValues(ResultRolledBack).Inc()
		a.Metrics.ApplyDuration.Observe(a.Clock.Since(began).Seconds())
		r.event = ReasonRolledBack
		r.history = &source.HistoryEntry{Source: st.Assigned, Result: source.ResultRolledBack, Message: st.Error}
	}
	return a.publish(ctx, node, r)
}
