package agent

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// TestStartupTaint: the startup taint the node registered with goes once
// the assigned config is active and passed its health gate, and only then;
// the node's other taints stay.
func TestStartupTaint(t *testing.T) {
	other := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	for name, tc := range map[string]struct {
		setup     func(t *testing.T, e *env)
		condition string
		want      []corev1.Taint
	}{
		"an applied config that passed its gate removes it": {
			setup: func(t *testing.T, e *env) {
				e.configMap(t, "a", cfgA, nil)
				e.assign(t, "a")
			},
			condition: "True Trial",
			want:      []corev1.Taint{other},
		},
		"a config that fails its gate keeps it": {
			setup: func(t *testing.T, e *env) {
				e.prober.Results = []error{errors.New("healthz: connection refused")}
				e.configMap(t, "a", cfgA, nil)
				e.assign(t, "a")
			},
			condition: "False RolledBack",
			want:      []corev1.Taint{other, {Key: source.StartupTaint, Effect: corev1.TaintEffectNoSchedule}},
		},
		"a refused config keeps it": {
			setup: func(t *testing.T, e *env) {
				e.configMap(t, "a", `{`+header+`,"maxPod":42}`, nil)
				e.assign(t, "a")
			},
			condition: "False Refused",
			want:      []corev1.Taint{other, {Key: source.StartupTaint, Effect: corev1.TaintEffectNoSchedule}},
		},
		"a node without an assignment keeps it: the controller decides whether a pool will configure it": {
			setup:     func(t *testing.T, e *env) {},
			condition: "True Local",
			want:      []corev1.Taint{other, {Key: source.StartupTaint, Effect: corev1.TaintEffectNoSchedule}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			n := e.node(t)
			n.Spec.Taints = []corev1.Taint{other, {Key: source.StartupTaint, Effect: corev1.TaintEffectNoSchedule}}
			if _, err := e.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, e)
			// A failed gate's sync reports the rollback and returns no
			// error; a refusal neither.
			e.sync(t)
			diff(t, "condition", tc.condition, e.condition(t))
			diff(t, "taints", tc.want, e.node(t).Spec.Taints)
		})
	}
}
