package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/kubectl-dkc/dkc/pkg/checkpoint"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// What the agent does when the kubelet's config holds bytes it never
// wrote, the values of --on-drift.
const (
	// DriftReport reports drift (condition, Event, history) and leaves the
	// file alone.
	DriftReport = "report"
	// DriftReassert reports drift and puts the target config back through
	// the restart and the health gate.
	DriftReassert = "reassert"
)

// DefaultDriftCheckInterval is how often the agent compares the kubelet's
// config with its record when nothing else makes it sync.
const DefaultDriftCheckInterval = time.Minute

func (a *Agent) reassert() bool { return a.OnDrift == DriftReassert }

// driftMessage is the status error under drift.
func (a *Agent) driftMessage(st checkpoint.State) string {
	return fmt.Sprintf("kubelet config drifted: it holds a config that dkc did not write (not the local config, not %s); --on-drift=%s", describe(st.Target()), a.onDrift())
}

func (a *Agent) onDrift() string {
	if a.OnDrift == "" {
		return DriftReport
	}
	return a.OnDrift
}

// drift handles a kubelet config that holds bytes the agent never wrote:
// something else (kubeadm upgrade, config management, a person) rewrote
// the file or the drop-in.
//
// Invariant: drift is reported in the status (no config named active, the
// error says why), the condition (Drift), an Event and a history entry,
// once per distinct content; with --on-drift=reassert the target config
// goes back through the same path as any apply or rollback (restart, health
// gate), otherwise the file is left alone.
func (a *Agent) drift(ctx context.Context, node *corev1.Node, c source.Carrier, st checkpoint.State, obs observation, as assignment) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	sum := sha256.Sum256(obs.effective)
	hash := hex.EncodeToString(sum[:8])
	msg := a.driftMessage(st)
	r := report{carrier: c, status: a.observedStatus(st, st.Assigned, obs, msg), reason: ReasonDrift, message: msg}
	if a.drifted != hash {
		logger.Info("The kubelet's config drifted from what the agent wrote", "effectiveSHA256", hash, "onDrift", a.onDrift())
		a.Metrics.Drifts.Inc()
		r.event = ReasonDrift
		r.history = &source.HistoryEntry{Source: st.Target(), Result: source.ResultDrift, Message: msg}
	}
	if err := a.publish(ctx, node, r); err != nil {
		return 0, err
	}
	a.drifted = hash
	if !a.reassert() {
		return 0, nil
	}
	logger.Info("Reasserting the recorded config", "config", describe(st.Target()))
	if st.Failed() {
		return 0, a.restoreLastKnownGood(ctx, node, c, st, a.Clock.Now(), false)
	}
	return a.apply(ctx, node, c, as, st)
}
