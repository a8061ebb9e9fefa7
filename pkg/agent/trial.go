package agent

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	"github.com/kubectl-dkc/dkc/pkg/checkpoint"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// trial promotes the assigned config to last-known-good once it has run for
// TrialDuration since its trial started, and otherwise says when to sync
// again: when the trial ends, or sooner for the next trial check (settle).
// It returns the record as it left it.
//
// Invariant: a trial's start is recorded once, in the record, and survives
// agent and kubelet restarts (upstream measured it from meta/assigned's
// mtime and restarted it at every kubelet start, kubernetes#57808). A store
// adopted without a start gets one, recorded at the first sync, so its
// trial ends like any other.
func (a *Agent) trial(ctx context.Context, st checkpoint.State) (time.Duration, checkpoint.State, error) {
	if st.Failed() || source.Equal(st.LastKnownGood, st.Assigned) {
		return 0, st, nil
	}
	if st.AssignedAt == nil {
		now := a.Clock.Now()
		st.AssignedAt = &now
		if err := a.setState(st); err != nil {
			return 0, st, err
		}
		klog.FromContext(ctx).Info("Recorded the start of the trial of an adopted assignment", "config", describe(st.Assigned))
	}
	if left := trialLeft(st, a.Clock.Now(), a.TrialDuration); left > 0 {
		return left, st, nil
	}
	st.LastKnownGood, st.Baseline = st.Assigned, nil
	if err := a.setState(st); err != nil {
		return 0, st, err
	}
	klog.FromContext(ctx).Info("Promoted config to last-known-good", "config", describe(st.Assigned), "trial", a.TrialDuration)
	return 0, st, nil
}

// trialLeft is when to sync again during st's trial, which started at
// st.AssignedAt, at now: when the trial ends, or sooner for the next trial
// check when the trial holds the node to a baseline; 0 or less when the
// config is due for promotion.
func trialLeft(st checkpoint.State, now time.Time, trialDuration time.Duration) time.Duration {
	left := trialDuration - now.Sub(*st.AssignedAt)
	if left > 0 && st.Baseline != nil {
		// Check the node against its baseline at least this often.
		left = min(left, trialCheckInterval)
	}
	return left
}
