package agent

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// startup makes the kubelet's config on disk the one the checkpoint store
// says, before the agent talks to the apiserver, so that a node whose
// apiserver is unreachable still runs the right config: meta/assigned, or
// meta/last-known-good when the assigned config was recorded as failed, or
// the local config. It restarts the kubelet only if it had to rewrite its
// config. Whatever it finds, the first sync with the apiserver gates a config
// still in its trial on the kubelet's health, since an agent killed between a
// restart and its health gate left it unchecked.
//
// A store with nothing assigned still gets Writer.Restore: a reset of a
// config in its trial records the store as fully local before it restores
// the kubelet's config, so an agent killed in between finds dkc's config
// on disk. Restore leaves a config that dkc did not write alone.
func (a *Agent) startup(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	st, err := a.stored()
	if err != nil {
		return fmt.Errorf("read checkpoint store: %w", err)
	}
	since := time.Time{}
	a.verify = &since
	if st.settledLocal() {
		logger.Info("No assignment recorded; the kubelet runs its local config")
	}
	target := st.active()
	payload, err := a.payload(target)
	if err != nil && target != nil && target != st.lastKnownGood {
		logger.Error(err, "Checkpoint unreadable; using the last-known-good config", "config", describe(target))
		target = st.lastKnownGood
		payload, err = a.payload(target)
	}
	if err != nil {
		logger.Error(err, "Checkpoint unreadable; using the local config", "config", describe(target))
		target, payload = nil, nil
	}
	before, err := a.Writer.Effective()
	if err != nil {
		return fmt.Errorf("read kubelet config: %w", err)
	}
	began := a.Clock.Now()
	if payload == nil {
		err = a.Writer.Restore()
	} else {
		err = a.Writer.Apply(payload)
	}
	if err != nil {
		return fmt.Errorf("write kubelet config: %w", err)
	}
	after, err := a.Writer.Effective()
	if err != nil {
		return fmt.Errorf("read kubelet config: %w", err)
	}
	if sameJSON(before, after) {
		logger.Info("Kubelet config on disk matches the checkpoint store", "config", describe(target))
		return nil
	}
	logger.Info("Kubelet config on disk differed from the checkpoint store; rewrote it", "config", describe(target))
	since, err = a.restart(ctx, before, after)
	if err != nil {
		return fmt.Errorf("restart kubelet: %w", err)
	}
	a.verify = &since
	logger.Info("Restarted the kubelet on the checkpointed config", "config", describe(target), "duration", a.Clock.Since(began))
	return nil
}

// payload returns the checkpointed config of src; nil for the local config.
func (a *Agent) payload(src *corev1.NodeConfigSource) ([]byte, error) {
	if src == nil {
		return nil, nil
	}
	return a.Store.LoadKey(src)
}
