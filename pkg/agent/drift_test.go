package agent

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// historyResults is the node's history as "Result name" per entry.
func (e *env) historyResults(t *testing.T) []string {
	t.Helper()
	h, err := source.History(e.node(t))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, en := range h {
		name := "local"
		if en.Source != nil {
			name = en.Source.ConfigMap.Name
		}
		out = append(out, en.Result+" "+name)
	}
	return out
}

// Something else rewrites the kubelet's config: the agent reports drift
// (status names no config active, condition, Event, history, once), and with
// --on-drift=reassert puts the assigned config back through the restart and
// the health gate.
func TestDrift(t *testing.T) {
	const foreign = `{` + header + `,"maxPods":77}`
	tests := map[string]struct {
		onDrift      string
		wantConfig   string
		wantStatus   *corev1.NodeConfigStatus
		wantCond     string
		wantEvents   []string
		wantHistory  []string
		wantRestarts int
	}{
		"report": {
			onDrift:      DriftReport,
			wantConfig:   foreign,
			wantCond:     "False Drift",
			wantEvents:   []string{"Warning Drift"},
			wantHistory:  []string{"Applied a", "Drift a"},
			wantRestarts: 1,
		},
		"reassert": {
			onDrift:      DriftReassert,
			wantConfig:   cfgA,
			wantStatus:   &corev1.NodeConfigStatus{Assigned: ref("a", "1"), Active: ref("a", "1")},
			wantCond:     "True Trial",
			wantEvents:   []string{"Warning Drift", "Normal Applied"},
			wantHistory:  []string{"Applied a", "Drift a", "Applied a"},
			wantRestarts: 2,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.a.OnDrift = tc.onDrift
			e.configMap(t, "a", cfgA, nil)
			e.assign(t, "a")
			e.sync(t)
			e.events()

			e.writer.Current = []byte(foreign) // kubeadm upgrade, config management
			e.sync(t)

			diff(t, "kubelet config", tc.wantConfig, string(e.writer.Current))
			st := e.status(t)
			if tc.wantStatus == nil {
				if st.Active != nil || !strings.Contains(st.Error, "kubelet config drifted") {
					t.Errorf("status under drift = active %v, error %q; want no active config and the drift error", st.Active, st.Error)
				}
			} else {
				diff(t, "status", tc.wantStatus, st)
			}
			diff(t, "condition", tc.wantCond, e.condition(t))
			diff(t, "events", tc.wantEvents, e.events())
			diff(t, "history", tc.wantHistory, e.historyResults(t))
			diff(t, "restarts", tc.wantRestarts, len(e.restart.CallsSnapshot()))

			// The next check changes nothing and reports nothing again.
			e.sync(t)
			diff(t, "events of the next check", []string(nil), e.events())
			diff(t, "history after the next check", tc.wantHistory, e.historyResults(t))
		})
	}
}

// A config the agent wrote itself, but not the one it should run (here the
// last-known-good one, put back by hand), is repaired through the restart
// and the health gate, not reported as drift.
func TestRepairOwnConfig(t *testing.T) {
	e := newEnv(t)
	e.onLastKnownGood(t, "a", cfgA)
	e.configMap(t, "b", cfgB, nil)
	e.assign(t, "b")
	e.sync(t)
	e.events()
	probes := len(e.prober.Expectations)

	e.writer.Current = []byte(cfgA)
	e.sync(t)

	diff(t, "kubelet config", cfgB, string(e.writer.Current))
	diff(t, "status", &corev1.NodeConfigStatus{Assigned: ref("b", "1"), Active: ref("b", "1"), LastKnownGood: ref("a", "1")}, e.status(t))
	diff(t, "probes", probes+1, len(e.prober.Expectations))
	diff(t, "events", []string{"Normal Applied"}, e.events())
}

// Every apply, rollback, refusal and reset leaves one history entry, in
// the status patch, and the history keeps the newest source.MaxHistory.
func TestHistory(t *testing.T) {
	e := newEnv(t)
	e.onLastKnownGood(t, "a", cfgA)
	e.prober.Results = []error{errors.New("healthz: connection refused")}
	e.configMap(t, "b", cfgB, nil)
	e.assign(t, "b")
	e.sync(t)
	e.configMap(t, "c", `{"apiVersion":"kubelet.config.k8s.io/v1beta1","maxPods":42}`, nil)
	e.assign(t, "c")
	e.sync(t)
	e.assign(t, "")
	e.sync(t)
	diff(t, "history", []string{"Applied a", "RolledBack b", "Refused c", "Reset local"}, e.historyResults(t))

	for i := range source.MaxHistory {
		name := fmt.Sprintf("x%d", i)
		e.configMap(t, name, fmt.Sprintf(`{`+header+`,"maxPods":%d}`, 50+i), nil)
		e.assign(t, name)
		e.sync(t)
	}
	h := e.historyResults(t)
	diff(t, "history length", source.MaxHistory, len(h))
	diff(t, "newest entry", fmt.Sprintf("Applied x%d", source.MaxHistory-1), h[len(h)-1])
}
