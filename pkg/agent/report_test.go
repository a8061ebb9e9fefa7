package agent

import (
	"context"
	"errors"
	"testing"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// TestOneReportPerSync: whatever a sync decides, it reports once: at most
// one patch of the Node (none when nothing changed), with every Event of
// what it did. The Verifying report during an apply's gate is the one other
// report (TestVerifyingBeforeReady); the fake prober here does not reach it.
func TestOneReportPerSync(t *testing.T) {
	const foreign = `{` + header + `,"maxPods":77}`
	tests := map[string]struct {
		prepare func(t *testing.T, e *env)
		// wantErr: the sync fails (and the work queue retries).
		wantErr     bool
		wantPatches int
		wantEvents  []string
	}{
		"first apply": {
			prepare: func(t *testing.T, e *env) {
				e.configMap(t, "a", cfgA, nil)
				e.assign(t, "a")
			},
			wantPatches: 1, wantEvents: []string{"Normal Applied"},
		},
		"apply of a ConfigMap carrying the allow-unsafe annotation": {
			prepare: func(t *testing.T, e *env) {
				e.configMap(t, "a", cfgA, map[string]string{source.AllowUnsafeAnnotation: "*"})
				e.assign(t, "a")
			},
			wantPatches: 1, wantEvents: []string{"Warning IgnoredAnnotation", "Normal Applied"},
		},
		"nothing changed": {
			prepare: func(t *testing.T, e *env) {
				e.onLastKnownGood(t, "a", cfgA)
				e.sync(t)
			},
		},
		"trial check that passes": {
			prepare: func(t *testing.T, e *env) {
				e.configMap(t, "a", cfgA, nil)
				e.assign(t, "a")
				e.sync(t)
				e.clk.Step(trialCheckInterval)
			},
		},
		"promotion": {
			prepare: func(t *testing.T, e *env) {
				e.configMap(t, "a", cfgA, nil)
				e.assign(t, "a")
				e.sync(t)
				e.clk.Step(trial)
			},
			wantPatches: 1,
		},
		"refusal": {
			prepare: func(t *testing.T, e *env) {
				e.configMap(t, "a", `{"apiVersion":"kubelet.config.k8s.io/v1beta1","maxPods":42}`, nil)
				e.assign(t, "a")
			},
			wantPatches: 1, wantEvents: []string{"Warning Refused"},
		},
		"ConfigMap edited under its pin": {
			prepare: func(t *testing.T, e *env) {
				e.onLastKnownGood(t, "a", cfgA)
				e.configMap(t, "a", cfgB, nil)
			},
			wantPatches: 1, wantEvents: []string{"Warning PinMismatch"},
		},
		"ConfigMap not found": {
			prepare:     func(t *testing.T, e *env) { e.assign(t, "missing") },
			wantPatches: 1, wantEvents: []string{"Warning Failed"},
		},
		"rollback": {
			prepare: func(t *testing.T, e *env) {
				e.onLastKnownGood(t, "a", cfgA)
				e.prober.Results = []error{errors.New("healthz: connection refused")}
				e.configMap(t, "b", cfgB, nil)
				e.assign(t, "b")
			},
			wantPatches: 1, wantEvents: []string{"Warning RolledBack"},
		},
		"reset": {
			prepare: func(t *testing.T, e *env) {
				e.onLastKnownGood(t, "a", cfgA)
				e.assign(t, "")
			},
			wantPatches: 1, wantEvents: []string{"Normal Reset"},
		},
		"drift reported": {
			prepare: func(t *testing.T, e *env) {
				e.onLastKnownGood(t, "a", cfgA)
				e.writer.Current = []byte(foreign)
			},
			wantPatches: 1, wantEvents: []string{"Warning Drift"},
		},
		"drift reasserted": {
			prepare: func(t *testing.T, e *env) {
				e.a.OnDrift = DriftReassert
				e.onLastKnownGood(t, "a", cfgA)
				e.writer.Current = []byte(foreign)
			},
			wantPatches: 1, wantEvents: []string{"Warning Drift", "Normal Applied"},
		},
		// The status, condition and history entry of the repair are those
		// the Node shows already: nothing to patch, one Event.
		"repair of a config the agent wrote": {
			prepare: func(t *testing.T, e *env) {
				e.onLastKnownGood(t, "a", cfgA)
				e.configMap(t, "b", cfgB, nil)
				e.assign(t, "b")
				e.sync(t)
				e.writer.Current = []byte(cfgA)
			},
			wantEvents: []string{"Normal Applied"},
		},
		"kubelet config not writable": {
			prepare: func(t *testing.T, e *env) {
				e.configMap(t, "a", cfgA, nil)
				e.assign(t, "a")
				e.writer.ApplyErr = errReadOnly
			},
			wantErr: true, wantPatches: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			tc.prepare(t, e)
			e.events()
			e.client.ClearActions()

			_, err := e.a.sync(context.Background(), e.node(t), e.getter)
			if (err != nil) != tc.wantErr {
				t.Fatalf("sync: %v; want an error: %v", err, tc.wantErr)
			}

			diff(t, "node patches", tc.wantPatches, e.nodePatches())
			diff(t, "events", tc.wantEvents, e.events())
		})
	}
}

// nodePatches counts the patches of the Node since the client's actions
// were last cleared.
func (e *env) nodePatches() int {
	patches := 0
	for _, a := range e.client.Actions() {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "nodes" {
			patches++
		}
	}
	return patches
}
