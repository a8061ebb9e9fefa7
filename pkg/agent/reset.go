package agent

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/kubectl-dkc/dkc/pkg/checkpoint"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// reset puts the node back on its local config when the assignment is gone,
// and clears the status.
//
// Invariant: the record drops the assignment, the last-known-good config and
// any error in one write before the kubelet's config is restored, keeping
// only the config last written (Active), so that a restarted agent knows the
// file holds dkc's config and restores it; once the local config is back,
// Active is cleared too.
func (a *Agent) reset(ctx context.Context, node *corev1.Node, st checkpoint.State) error {
	a.refused = nil
	a.verify = nil
	a.downloadFailed = ""
	logger := klog.FromContext(ctx)
	obs := a.observe(st)
	if obs.err != nil {
		return obs.err
	}
	changed := st != (checkpoint.State{}) || obs.source != nil
	if obs.drift && !a.reassert() && st.Assigned == nil && st.LastKnownGood == nil {
		// Bytes no one assigned, with nothing assigned: the operator's.
		changed = false
	}
	restarted := false
	message := "assignment removed; kubelet runs its local config"
	if changed {
		logger.Info("Assignment removed; restoring the local config")
		if err := a.setState(checkpoint.State{Active: st.Active}); err != nil {
			return err
		}
		var err error
		restarted, _, err = a.activate(ctx, nil, nil, obs.effective, gating{kubelet: true}, nil)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// Nothing to fall back to: report and retry.
			_ = a.publish(ctx, node, report{keepStatus: true, reason: ReasonFailed, message: "restore local config: " + err.Error()})
			return fmt.Errorf("restore local config: %w", err)
		}
		if err := a.setState(checkpoint.State{}); err != nil {
			return err
		}
		a.Metrics.Resets.Inc()
	}
	r := report{status: nil}
	switch {
	case changed || source.Condition(node.Status.Conditions) != nil:
		r.reason, r.message = ReasonReset, message
		if changed {
			r.event = ReasonReset
			r.history = &source.HistoryEntry{Result: source.ResultReset, Message: message}
		}
	default:
		// The agent's first report on a node that never had an
		// assignment: it shows that an agent looks after the node.
		r.reason, r.message = ReasonLocal, "no config assigned; kubelet runs its local config"
	}
	if restarted {
		logger.Info("Restored the local config", "restarted", restarted)
	}
	return a.publish(ctx, node, r)
}
