package agent

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/kubectl-dkc/dkc/pkg/checkpoint"
)

// reset puts the node back on its local config when the assignment is gone
// (decideReset), and returns done, the report of it, or the report of its
// failure.
//
// Invariant: the record drops the assignment, the last-known-good config and
// any error in one write before the kubelet's config is restored, keeping
// only the config last written (Active), so that a restarted agent knows the
// file holds dkc's config and restores it; once the local config is back,
// Active is cleared too.
func (a *Agent) reset(ctx context.Context, o *observed, done report) outcome {
	logger := klog.FromContext(ctx)
	logger.Info("Assignment removed; restoring the local config")
	if err := a.setState(checkpoint.State{Active: o.st.Active}); err != nil {
		return outcome{err: err}
	}
	restarted, _, err := a.activate(ctx, nil, nil, o.file.effective, gating{kubelet: true}, nil)
	if err != nil {
		if ctx.Err() != nil {
			return outcome{err: ctx.Err()}
		}
		// Nothing to fall back to: report and retry.
		return outcome{
			report: &report{keepStatus: true, reason: ReasonFailed, message: "restore local config: " + err.Error()},
			err:    fmt.Errorf("restore local config: %w", err),
		}
	}
	if err := a.setState(checkpoint.State{}); err != nil {
		return outcome{err: err}
	}
	a.Metrics.Resets.Inc()
	if restarted {
		logger.Info("Restored the local config", "restarted", restarted)
	}
	return outcome{report: &done}
}
