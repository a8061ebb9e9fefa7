package agent

import (
	"fmt"
	"time"

	"github.com/kubectl-dkc/dkc/pkg/checkpoint"
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
func driftMessage(st checkpoint.State, onDrift string) string {
	return fmt.Sprintf("kubelet config drifted: it holds a config that dkc did not write (not the local config, not %s); --on-drift=%s", describe(st.Target()), onDrift)
}

func (a *Agent) onDrift() string {
	if a.OnDrift == "" {
		return DriftReport
	}
	return a.OnDrift
}
