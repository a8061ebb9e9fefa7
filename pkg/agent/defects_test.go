package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubectl-dkc/dkc/pkg/atomicfile/atomicfiletest"
	"github.com/kubectl-dkc/dkc/pkg/checkpoint"
	"github.com/kubectl-dkc/dkc/pkg/checkpoint/checkpointtest"
)

// A store that an old kubelet or an older dkc wrote has no trial start. The
// first sync records one, so the trial ends TrialDuration later and the
// config is promoted (it used to restart the trial on every sync).
func TestTrialStartRecordedOnceForAdoptedStore(t *testing.T) {
	e := newEnv(t)
	e.configMap(t, "a", cfgA, nil)
	// As a kubelet or an older dkc left it: no record, no trial start.
	checkpointtest.Write(t, e.dir, checkpointtest.Layout{
		Assigned:    ref("a", "1"),
		Checkpoints: map[string]map[string][]byte{"uid-a/1": {"kubelet": []byte(cfgA)}},
	})
	e.writer.Current, e.writer.Owned = []byte(cfgA), true
	e.assign(t, "a")

	e.sync(t)
	e.clk.Step(trial)
	e.sync(t)

	diff(t, "last-known-good after one trial", ref("a", "1"), e.stored(t).LastKnownGood)
	diff(t, "condition", "True Applied", e.condition(t))
}

// A rollback that fails half-way (the last-known-good checkpoint cannot be
// loaded, or the kubelet config cannot be read, once) must not report the
// last-known-good config as active while the kubelet runs the failed one,
// and the next sync must finish the rollback.
func TestRollbackFailingHalfWayIsRetried(t *testing.T) {
	tests := map[string]struct {
		// breakOnce makes one step of the rollback fail; it returns the
		// function that repairs it.
		breakOnce func(t *testing.T, e *env) (repair func())
	}{
		"last-known-good checkpoint unreadable": {
			breakOnce: func(t *testing.T, e *env) func() {
				dir := filepath.Join(e.store.Dir(), "checkpoints", "uid-a", "1")
				away := filepath.Join(e.dir, "away")
				must(t, os.Rename(dir, away))
				return func() {
					must(t, os.MkdirAll(filepath.Dir(dir), 0o700))
					must(t, os.Rename(away, dir))
				}
			},
		},
		"kubelet config unreadable": {
			breakOnce: func(t *testing.T, e *env) func() {
				e.writer.EffectiveErr = errors.New("read /var/lib/kubelet/config.yaml: input/output error")
				return func() { e.writer.EffectiveErr = nil }
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.onLastKnownGood(t, "a", cfgA)
			e.configMap(t, "b", cfgB, nil)
			e.assign(t, "b")
			e.prober.Results = []error{errors.New("healthz: connection refused")}
			var repair func()
			e.restart.OnCall = func(string) {
				if repair == nil {
					repair = tc.breakOnce(t, e) // after b is on the kubelet
				}
			}
			if _, err := e.a.sync(context.Background(), e.node(t), e.getter); err == nil {
				t.Fatalf("sync with a broken rollback: no error")
			}
			e.restart.OnCall = nil
			diff(t, "kubelet config after the broken rollback", cfgB, string(e.writer.Current))
			if st := e.status(t); st != nil && st.Active != nil && st.Active.ConfigMap.Name == "a" {
				t.Errorf("status names a as active while the kubelet runs b: %+v", st)
			}

			repair()
			e.sync(t)

			diff(t, "kubelet config after the retry", cfgA, string(e.writer.Current))
			diff(t, "status active", ref("a", "1"), e.status(t).Active)
			diff(t, "condition", "False RolledBack", e.condition(t))
		})
	}
}

// Startup falls back to the local config when the assigned checkpoint is
// unreadable (here: the assignment of a was committed, by an older dkc
// without a record, so that the store reads as running a; then the agent
// crashed, and the checkpoint was lost). Status must then not name a as
// active, and the first sync puts a back (re-checkpointed from its
// ConfigMap) through the health gate.
func TestStartupFallbackIsReportedAndRepaired(t *testing.T) {
	e := newEnv(t)
	e.configMap(t, "a", cfgA, nil)
	e.assign(t, "a")
	save(t, e, "a", cfgA)
	e.writeOlderStore(t, checkpointtest.Layout{Assigned: ref("a", "1")})
	must(t, os.RemoveAll(filepath.Join(e.store.Dir(), "checkpoints", "uid-a")))

	must(t, e.a.startup(context.Background()))
	diff(t, "kubelet config after the fallback", local, string(e.writer.Current))

	e.sync(t)
	diff(t, "kubelet config after the first sync", cfgA, string(e.writer.Current))
	diff(t, "status active", ref("a", "1"), e.status(t).Active)
	diff(t, "restarts", []string{"Restart"}, e.restart.CallsSnapshot())
	diff(t, "probes", 1, len(e.prober.Expectations))
	diff(t, "probed config", cfgA, string(e.prober.Expectations[0].Config))
}

// apply used to clear the last error before it recorded the new
// assignment; a crash in between left "assigned = the config that failed,
// no error", and startup put that known-bad config back on the kubelet.
// Here the write of the new assignment fails after the last error is
// handled, as a crash would stop it.
func TestCommitNeverRevivesAFailedConfig(t *testing.T) {
	e := newEnv(t)
	e.onLastKnownGood(t, "a", cfgA)
	e.configMap(t, "b", cfgB, nil)
	e.assign(t, "b")
	e.prober.Results = []error{errors.New("healthz: connection refused")}
	e.sync(t)
	diff(t, "kubelet config after b's rollback", cfgA, string(e.writer.Current))

	// The agent crashes as it renames the new meta/assigned into place.
	crash := &atomicfiletest.FaultFS{CrashIf: func(op, path string) bool {
		return op == "rename" && strings.HasSuffix(path, "/meta/assigned")
	}}
	crashing, err := checkpoint.OpenFS(e.dir, e.clk, crash)
	must(t, err)
	e.a.Store = crashing
	e.configMap(t, "c", `{`+header+`,"maxPods":44}`, nil)
	e.assign(t, "c")
	_, _ = e.a.sync(context.Background(), e.node(t), e.getter)
	if !crash.Crashed() {
		t.Fatalf("the apply of c never renamed meta/assigned")
	}

	e.a = e.newAgent()
	must(t, e.a.startup(context.Background()))
	if string(e.writer.Current) == cfgB {
		t.Fatalf("startup put b, the config that failed its health gate, back on the kubelet")
	}
}

// An agent that starts during a config's trial gates that config on the
// kubelet's health in its first sync that settles it. An apply of another
// config in between whose write fails (and is undone) must keep that duty:
// it used to drop it, so the config in trial was promoted without a gate.
func TestVerifyKeptAcrossAnUndoneApply(t *testing.T) {
	e := newEnv(t)
	e.configMap(t, "a", cfgA, nil)
	e.assign(t, "a")
	e.sync(t) // a in trial
	e.configMap(t, "b", cfgB, nil)
	e.assign(t, "b")
	e.a = e.newAgent() // restarted during a's trial
	must(t, e.a.startup(context.Background()))
	probes := len(e.prober.Expectations)

	e.writer.ApplyErr = errReadOnly
	if _, err := e.a.sync(context.Background(), e.node(t), e.getter); err == nil {
		t.Fatal("sync with a read-only config dir: no error")
	}
	diff(t, "probes after the undone apply", probes, len(e.prober.Expectations))
	e.writer.ApplyErr = nil
	e.assign(t, "a") // the operator goes back to a
	e.sync(t)

	diff(t, "probes of a after the agent restarted", probes+1, len(e.prober.Expectations))
}

// A checkpoint that cannot be written fails the sync with one report of the
// failure on the Node, not two.
func TestCheckpointFailureReportedOnce(t *testing.T) {
	e := newEnv(t)
	e.configMap(t, "a", cfgA, nil)
	e.assign(t, "a")
	dir := filepath.Join(e.store.Dir(), "checkpoints")
	must(t, os.RemoveAll(dir))
	must(t, os.WriteFile(dir, nil, 0o600)) // no directory can be made there
	e.client.ClearActions()

	if _, err := e.a.sync(context.Background(), e.node(t), e.getter); err == nil {
		t.Fatal("sync with an unwritable store: no error")
	}
	diff(t, "node patches", 1, e.nodePatches())
	diff(t, "kubelet config", local, string(e.writer.Current))
	diff(t, "condition", "False Failed", e.condition(t))
}
