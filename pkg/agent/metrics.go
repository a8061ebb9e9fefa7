package agent

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Results of an apply, the label of applies_total.
const (
	// ResultApplied: the kubelet runs the assigned config and passed the
	// health gate (or did not need a restart).
	ResultApplied = "applied"
	// ResultRolledBack: the kubelet failed the health gate on the assigned
	// config and was put back on the last-known-good one.
	ResultRolledBack = "rolled_back"
	// ResultRefused: the config failed to load or validate, or makes an
	// unsafe change without the opt-in; the kubelet was not touched.
	ResultRefused = "refused"
	// ResultFailed: the config could not be downloaded or written, or the
	// kubelet could not be restarted.
	ResultFailed = "failed"
)

// Results are the values of applies_total's result label.
var Results = []string{ResultApplied, ResultRolledBack, ResultRefused, ResultFailed}

// Phases of an apply, the label of phase_duration_seconds.
const (
	PhaseValidate = "validate"
	PhaseWrite    = "write"
	PhaseRestart  = "restart"
	PhaseProbe    = "probe"
	PhasePods     = "pods"
	PhaseRollback = "rollback"
	PhaseReport   = "report"
)

// Phases are the values of phase_duration_seconds's phase label, in the
// order of an apply.
var Phases = []string{PhaseValidate, PhaseWrite, PhaseRestart, PhaseProbe, PhasePods, PhaseRollback, PhaseReport}

// Metrics are the agent's Prometheus metrics, in a registry of their own
// (no global state): serve Registry on /metrics.
type Metrics struct {
	Registry *prometheus.Registry

	Applies       *prometheus.CounterVec
	Rollbacks     prometheus.Counter
	Resets        prometheus.Counter
	Drifts        prometheus.Counter
	ApplyDuration prometheus.Histogram
	PhaseDuration *prometheus.HistogramVec
	SyncErrors    prometheus.Counter
	PinMismatches prometheus.Counter
}

// NewMetrics returns the agent's metrics, registered in a new registry
// together with the Go and process collectors.
func NewMetrics() *Metrics {
	const ns, sub = "dkc", "agent"
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Applies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "applies_total",
			Help: "Assigned configs the agent handled, by result (" + strings.Join(Results, ", ") + ").",
		}, []string{"result"}),
		Rollbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "rollbacks_total",
			Help: "Rollbacks to the last-known-good config after a failed health gate.",
		}),
		Resets: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "resets_total",
			Help: "Returns to the node's local config after the assignment was removed.",
		}),
		Drifts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "drifts_total",
			Help: "Times the kubelet's config was found holding bytes the agent never wrote (once per distinct content).",
		}),
		ApplyDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "apply_duration_seconds",
			Help:    "Time from seeing a new assignment to the health gate's verdict (including a rollback).",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 8, 13, 21, 34, 60, 120, 300},
		}),
		PhaseDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "phase_duration_seconds",
			Help:    "Time spent in each phase of an apply: " + strings.Join(Phases, ", ") + ".",
			Buckets: []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 8, 13, 21, 34, 60, 120},
		}, []string{"phase"}),
		SyncErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "sync_errors_total",
			Help: "Syncs that ended in an error and were retried with backoff.",
		}),
		PinMismatches: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "pin_mismatches_total",
			Help: "Assignments refused because the ConfigMap's bytes are not the ones its assigner pinned (also counted as applies_total{result=\"refused\"}).",
		}),
	}
	for _, r := range Results {
		m.Applies.WithLabelValues(r)
	}
	m.Registry.MustRegister(m.Applies, m.Rollbacks, m.Resets, m.Drifts, m.ApplyDuration, m.PhaseDuration, m.SyncErrors, m.PinMismatches,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
