package agent

import (
	"context"
	"errors"
	"time"

	"k8s.io/klog/v2"

	"github.com/kubectl-dkc/dkc/pkg/kubelet"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// startup makes the kubelet's config the target the record names, before
// the agent talks to the apiserver, so that a node whose apiserver is
// unreachable still runs the right config: the assigned config, or the
// last-known-good one when the assigned one failed, or the local config.
//
// Invariant: after startup the kubelet's config holds a config the record
// names (or drift that --on-drift=report leaves alone), and the record says
// so (Active). It writes through activate, restarting the kubelet only if
// the effective config changed, without the health gate, which needs the
// apiserver: the first sync gates a config still in its trial, since an
// agent killed between a restart and its health gate left it unchecked. A
// checkpoint that cannot be read falls back to the last-known-good config,
// then the local one; the record's Active then says what was written, and
// the first sync repairs towards the assignment from its ConfigMap.
//
// A store adopted from a kubelet or an older dkc has no record of what the
// agent wrote, so its config is trusted as older dkc did: a file that
// matches nothing is put on the store's target rather than reported as
// drift. The record is written at once, with a trial start if the store had
// none.
func (a *Agent) startup(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if c, ok := a.Writer.(kubelet.TempCleaner); ok {
		if err := c.CleanTemps(); err != nil {
			// A leftover temporary is harmless; a read-only directory
			// must not stop the agent.
			logger.Error(err, "Could not remove the temporaries of the kubelet's config")
		}
	}
	st, adopted, err := a.Store.State()
	if err != nil {
		return err
	}
	if adopted {
		if st.Assigned != nil && st.AssignedAt == nil {
			now := a.Clock.Now()
			st.AssignedAt = &now
		}
		if err := a.setState(st); err != nil {
			return err
		}
		logger.Info("Adopted a checkpoint store without a record", "assigned", describe(st.Assigned), "lastKnownGood", describe(st.LastKnownGood))
	}
	since := time.Time{}
	a.verify = &since
	obs := a.observeFile(st, nil)
	if obs.err != nil {
		return obs.err
	}
	target := st.Target()
	switch {
	case !obs.drift && source.Equal(obs.source, target):
		logger.Info("Kubelet config on disk matches the checkpoint store", "config", describe(target))
		return nil
	case obs.drift && !adopted && !a.reassert():
		logger.Info("Kubelet config on disk holds a config dkc did not write; leaving it (--on-drift=report)", "want", describe(target))
		return nil
	}
	payload, err := a.payload(target)
	if err != nil && target != nil && target != st.LastKnownGood {
		logger.Error(err, "Checkpoint unreadable; using the last-known-good config", "config", describe(target))
		target = st.LastKnownGood
		payload, err = a.payload(target)
	}
	if err != nil {
		logger.Error(err, "Checkpoint unreadable; using the local config", "config", describe(target))
		target, payload = nil, nil
	}
	began := a.Clock.Now()
	restarted, since, err := a.activate(ctx, target, payload, obs.effective, gating{}, nil)
	var werr *writeError
	if errors.As(err, &werr) {
		// The kubelet keeps what its config holds, which the record's
		// Active and the status name; the first sync reports the
		// failure and retries with backoff.
		logger.Error(err, "Could not write the kubelet's config; leaving it, the first sync retries", "config", describe(target))
		return nil
	}
	if err != nil {
		return err
	}
	if restarted {
		a.verify = &since
		logger.Info("Restarted the kubelet on the checkpointed config", "config", describe(target), "duration", a.Clock.Since(began))
	}
	return nil
}
