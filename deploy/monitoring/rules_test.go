// Package monitoring holds deploy/monitoring's tests: its PrometheusRule
// loads into Prometheus's own rule parser, and names only metrics that dkc
// serves.
package monitoring

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/pkg/agent"
	"github.com/kubectl-dkc/dkc/pkg/controller"
)

// external are the metrics a rule may name that dkc does not serve:
// Prometheus's own up.
var external = []string{"up"}

// wantAlerts are the alerts issue 34 asks for: a rollout halted, a node
// rolled back, an agent down, a pin mismatch.
var wantAlerts = []string{"DkcRolloutHalted", "DkcNodeRolledBack", "DkcAgentDown", "DkcPinMismatch"}

func TestPrometheusRule(t *testing.T) {
	raw, err := os.ReadFile("prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(raw, &obj); err != nil {
		t.Fatalf("prometheusrule.yaml: %v", err)
	}
	if obj.APIVersion != "monitoring.coreos.com/v1" || obj.Kind != "PrometheusRule" {
		t.Fatalf("prometheusrule.yaml is a %s %s, want a monitoring.coreos.com/v1 PrometheusRule", obj.APIVersion, obj.Kind)
	}
	// spec.groups is a Prometheus rule file's content.
	groups, err := yaml.Marshal(map[string]any{"groups": obj.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	p := parser.NewParser(parser.Options{})
	rgs, errs := rulefmt.Parse(groups, false, model.UTF8Validation, p, promslog.NewNopLogger())
	for _, err := range errs {
		t.Errorf("rulefmt: %v", err)
	}
	if rgs == nil {
		t.FailNow()
	}

	served := servedMetrics(t)
	var alerts []string
	for _, g := range rgs.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			expr, err := p.ParseExpr(r.Expr)
			if err != nil {
				t.Errorf("alert %s: expr %q: %v", r.Alert, r.Expr, err)
				continue
			}
			parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
				if vs, ok := node.(*parser.VectorSelector); ok && !served[vs.Name] && !slices.Contains(external, vs.Name) {
					t.Errorf("alert %s names metric %q, which dkc does not serve", r.Alert, vs.Name)
				}
				return nil
			})
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s: want a severity label, and a summary and a description", r.Alert)
			}
		}
	}
	for _, a := range wantAlerts {
		if !slices.Contains(alerts, a) {
			t.Errorf("no alert %s", a)
		}
	}
}

// fqName finds a metric's name in its Desc's String.
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// servedMetrics are the names of the series the agent and the controller
// serve: every collector of their registries, described.
func servedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	describe := func(c prometheus.Collector) {
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := fqName.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("no name in %s", d)
			}
			names[m[1]] = true
		}
	}
	m := agent.NewMetrics()
	for _, c := range []prometheus.Collector{m.Applies, m.Rollbacks, m.Resets, m.Drifts, m.ApplyDuration, m.PhaseDuration, m.SyncErrors, m.PinMismatches} {
		describe(c)
	}
	describe((&controller.Controller{}).Collector())
	if !names["dkc_agent_rollbacks_total"] || !names["dkc_controller_rollouts"] {
		t.Fatalf("metrics found: %v; want the agent's and the controller's", names)
	}
	return names
}
