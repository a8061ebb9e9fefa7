package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-dkc/dkc/pkg/rollout"
)

// States are the values of dkc_controller_rollouts's state label.
var States = []rollout.State{rollout.Running, rollout.Paused, rollout.Halted, rollout.Aborted, rollout.Done}

var rolloutsDesc = prometheus.NewDesc("dkc_controller_rollouts",
	"NodeConfigRollouts of the config namespace by status.state (a rollout no driver looked at yet counts as Running), as the leader's cache holds them; a standby reports none.",
	[]string{"state"}, nil)

// Collector returns the controller's metrics, read from its cache of the
// rollouts at each scrape: dkc_controller_rollouts{state}.
func (c *Controller) Collector() prometheus.Collector { return collector{c} }

type collector struct{ c *Controller }

func (collector) Describe(ch chan<- *prometheus.Desc) { ch <- rolloutsDesc }

func (m collector) Collect(ch chan<- prometheus.Metric) {
	m.c.mu.Lock()
	indexer := m.c.indexer
	m.c.mu.Unlock()
	if indexer == nil {
		return
	}
	counts := map[rollout.State]int{}
	for _, obj := range indexer.List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		state, _, _ := unstructured.NestedString(u.Object, "status", "state")
		if state == "" {
			state = string(rollout.Running)
		}
		counts[rollout.State(state)]++
	}
	for _, s := range States {
		ch <- prometheus.MustNewConstMetric(rolloutsDesc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
}
