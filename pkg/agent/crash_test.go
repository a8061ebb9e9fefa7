package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kubectl-dkc/dkc/pkg/atomicfile"
	"github.com/kubectl-dkc/dkc/pkg/atomicfile/atomicfiletest"
	"github.com/kubectl-dkc/dkc/pkg/checkpoint"
	"github.com/kubectl-dkc/dkc/pkg/checkpoint/checkpointtest"
	"github.com/kubectl-dkc/dkc/pkg/flagz"
	"github.com/kubectl-dkc/dkc/pkg/kubelet"
	kfake "github.com/kubectl-dkc/dkc/pkg/kubelet/fake"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// The crash campaign: every path that writes (apply, rollback, promotion,
// reset, startup repair, drift reassert) runs once to count its file system
// operations (each write, rename, fsync, create, remove of the store and the
// kubelet config writer), then once per operation with a crash there: that
// operation and every later one fail and do nothing, as if the process died.
// A new agent then starts on the same directories with a working file
// system, and the invariants must hold:
//
//   - the store decodes (the record and upstream's meta files);
//   - the kubelet's config is exactly one of local, assigned and
//     last-known-good as the record names them;
//   - after recovery the status names as active the config the file holds,
//     and the node converged to where the scenario leads;
//   - nothing is left that GC or startup would not remove: no temporaries,
//     no checkpoint the record does not name.
//
// The crash model is a killed process (what was done stays, fsynced or
// not), so the campaign skips real fsyncs to stay fast; they are counted.

// badPayload is a config that fails the health gate in the campaign.
const badPayload = `{` + header + `,"maxPods":66}`

// healthProber fails the health gate on badPayload only.
type healthProber struct{}

func (healthProber) Probe(_ context.Context, want kubelet.Expectation) error {
	if strings.Contains(string(want.Config), `"maxPods":66`) {
		return errors.New("healthz: connection refused")
	}
	return nil
}

// Running fails: changes are judged against the config file alone.
func (healthProber) Running(context.Context, []byte) ([]byte, error) {
	return nil, errors.New("no configz")
}

// Flags: a kubelet before /flagz.
func (healthProber) Flags(context.Context, []byte) (map[string]string, error) {
	return nil, flagz.ErrNotServed
}

// crashEnv is an agent with the real store and the real kubelet config
// writer on files in dir, all writes through fsys.
type crashEnv struct {
	*env
	mode                  kubelet.ApplyMode
	configPath, configDir string
	configure             func(a *Agent)
}

func newCrashEnv(t *testing.T, dir string, mode kubelet.ApplyMode, configure func(*Agent)) *crashEnv {
	t.Helper()
	ce := newCrashEnvOn(t, dir, mode, configure, t0, readyNode())
	must(t, os.MkdirAll(ce.configDir, 0o700))
	must(t, os.WriteFile(ce.configPath, []byte(local), 0o600))
	// An operator's drop-in, merged over every config.
	must(t, os.WriteFile(filepath.Join(ce.configDir, "10-operator.conf"), []byte(`{`+header+`,"serializeImagePulls":false}`), 0o600))
	ce.restartAgent(t, &atomicfiletest.FaultFS{NoSync: true})
	return ce
}

// newCrashEnvOn is a crashEnv on the files in dir and the API objects objs,
// at time now, without an agent.
func newCrashEnvOn(t *testing.T, dir string, mode kubelet.ApplyMode, configure func(*Agent), now time.Time, objs ...runtime.Object) *crashEnv {
	t.Helper()
	ce := &crashEnv{mode: mode, configPath: filepath.Join(dir, "kubelet", "config.json"), configDir: filepath.Join(dir, "kubelet", "conf.d"), configure: configure}
	clk := testingclock.NewFakeClock(now)
	ce.env = &env{
		// The simple clientset: no managed fields, several times faster
		// per patch, which thousands of crash points feel.
		client:   fake.NewSimpleClientset(objs...), //nolint:staticcheck // see above
		restart:  &kfake.FakeRestarter{},
		prober:   &kfake.FakeProber{},
		clk:      clk,
		recorder: record.NewFakeRecorder(1000),
		dir:      dir,
		pods:     &fakePods{},
	}
	return ce
}

// clone copies ce's files and API objects into a new crashEnv in dir.
func (ce *crashEnv) clone(t *testing.T, dir string) *crashEnv {
	t.Helper()
	must(t, copyTree(ce.dir, dir))
	objs := []runtime.Object{ce.node(t)}
	cms, err := ce.client.CoreV1().ConfigMaps("").List(context.Background(), metav1.ListOptions{})
	must(t, err)
	for i := range cms.Items {
		objs = append(objs, &cms.Items[i])
	}
	return newCrashEnvOn(t, dir, ce.mode, ce.configure, ce.clk.Now(), objs...)
}

// copyTree copies the files and directories under src to dst, with their
// modes.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(target, fi.Mode().Perm())
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, fi.Mode().Perm())
	})
}

// restartAgent is a new agent process on the same node and directories,
// writing through fsys. It does not run startup.
func (ce *crashEnv) restartAgent(t *testing.T, fsys atomicfile.FS) {
	t.Helper()
	store, err := checkpoint.OpenFS(filepath.Join(ce.dir, "dkc"), ce.clk, fsys)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	ce.store = store
	ce.a = ce.newAgent()
	ce.a.Prober = healthProber{}
	if ce.configure != nil {
		ce.configure(ce.a)
	}
	if ce.mode == kubelet.DropIn {
		ce.a.Writer = &kubelet.DropInWriter{ConfigPath: ce.configPath, ConfigDir: ce.configDir, FS: fsys}
	} else {
		ce.a.Writer = &kubelet.ReplaceWriter{ConfigPath: ce.configPath, ConfigDir: ce.configDir, Store: store, FS: fsys}
	}
}

// syncIgnoringErrors is one sync as the work queue runs it.
func (ce *crashEnv) syncIgnoringErrors(t *testing.T) {
	t.Helper()
	_, _ = ce.a.sync(context.Background(), ce.node(t), ce.getter)
}

// crashScenario prepares a node with a working file system, then runs
// action, the path under test, where the crashes are injected.
type crashScenario struct {
	// configure sets the agent's options, for the agent under test and
	// the one that recovers.
	configure func(a *Agent)
	prepare   func(t *testing.T, ce *crashEnv)
	action    func(t *testing.T, ce *crashEnv)
	// wantActive is the ConfigMap the node runs once recovered; "" is the
	// local config.
	wantActive string
	// badRecorded: the failure of badPayload was recorded before the
	// action, so no crash may ever put it back on the kubelet.
	badRecorded bool
}

var crashScenarios = map[string]crashScenario{
	"apply after a rollback": {
		prepare: func(t *testing.T, ce *crashEnv) {
			ce.onLastKnownGood(t, "a", cfgA)
			ce.configMap(t, "bad", badPayload, nil)
			ce.assign(t, "bad")
			ce.sync(t)
			ce.configMap(t, "b", cfgB, nil)
		},
		action:      func(t *testing.T, ce *crashEnv) { ce.assign(t, "b"); ce.syncIgnoringErrors(t) },
		wantActive:  "b",
		badRecorded: true,
	},
	"apply of a CPU manager policy change (stop, remove state, start)": {
		prepare: func(t *testing.T, ce *crashEnv) {
			ce.onLastKnownGood(t, "a", cfgA)
			ce.configMap(t, "cpu", `{`+header+`,"maxPods":42,"cpuManagerPolicy":"static"}`, nil)
		},
		action:     func(t *testing.T, ce *crashEnv) { ce.assign(t, "cpu", "resource-managers"); ce.syncIgnoringErrors(t) },
		wantActive: "cpu",
	},
	"apply over a config in trial": {
		prepare: func(t *testing.T, ce *crashEnv) {
			ce.configMap(t, "a", cfgA, nil)
			ce.assign(t, "a")
			ce.sync(t)
			ce.configMap(t, "b", cfgB, nil)
		},
		action:     func(t *testing.T, ce *crashEnv) { ce.assign(t, "b"); ce.syncIgnoringErrors(t) },
		wantActive: "b",
	},
	"reset of a last-known-good config": {
		prepare:    func(t *testing.T, ce *crashEnv) { ce.onLastKnownGood(t, "a", cfgA) },
		action:     func(t *testing.T, ce *crashEnv) { ce.assign(t, ""); ce.syncIgnoringErrors(t) },
		wantActive: "",
	},
	"reset after a rollback": {
		prepare: func(t *testing.T, ce *crashEnv) {
			ce.onLastKnownGood(t, "a", cfgA)
			ce.configMap(t, "bad", badPayload, nil)
			ce.assign(t, "bad")
			ce.sync(t)
		},
		action:      func(t *testing.T, ce *crashEnv) { ce.assign(t, ""); ce.syncIgnoringErrors(t) },
		wantActive:  "",
		badRecorded: true,
	},
	"startup adopts an older store": {
		// An older dkc recorded bad as failed in the old layout, and died
		// before it put a back: no record, the kubelet on bad.
		prepare: func(t *testing.T, ce *crashEnv) {
			ce.onLastKnownGood(t, "a", cfgA)
			ce.configMap(t, "bad", badPayload, nil)
			ce.assign(t, "bad")
			save(t, ce.env, "bad", badPayload)
			ce.writeOlderStore(t, checkpointtest.Layout{Assigned: ref("bad", "1"), LastKnownGood: ref("a", "1"),
				LastError: "failed to validate config, see Kubelet log for details: x"})
			must(t, ce.a.Writer.Apply([]byte(badPayload)))
		},
		action: func(t *testing.T, ce *crashEnv) {
			_ = ce.a.startup(context.Background())
			ce.syncIgnoringErrors(t)
		},
		wantActive:  "a",
		badRecorded: true,
	},
	"first apply (takes the baseline)": {
		prepare:    func(t *testing.T, ce *crashEnv) { ce.configMap(t, "a", cfgA, nil) },
		action:     func(t *testing.T, ce *crashEnv) { ce.assign(t, "a"); ce.syncIgnoringErrors(t) },
		wantActive: "a",
	},
	"apply over a last-known-good config": {
		prepare: func(t *testing.T, ce *crashEnv) {
			ce.onLastKnownGood(t, "a", cfgA)
			ce.configMap(t, "b", cfgB, nil)
		},
		action:     func(t *testing.T, ce *crashEnv) { ce.assign(t, "b"); ce.syncIgnoringErrors(t) },
		wantActive: "b",
	},
	"rollback to the last-known-good config": {
		prepare: func(t *testing.T, ce *crashEnv) {
			ce.onLastKnownGood(t, "a", cfgA)
			ce.configMap(t, "bad", badPayload, nil)
		},
		action:     func(t *testing.T, ce *crashEnv) { ce.assign(t, "bad"); ce.syncIgnoringErrors(t) },
		wantActive: "a",
	},
	"rollback to the local config": {
		prepare:    func(t *testing.T, ce *crashEnv) { ce.configMap(t, "bad", badPayload, nil) },
		action:     func(t *testing.T, ce *crashEnv) { ce.assign(t, "bad"); ce.syncIgnoringErrors(t) },
		wantActive: "",
	},
	"promotion": {
		prepare: func(t *testing.T, ce *crashEnv) {
			ce.configMap(t, "a", cfgA, nil)
			ce.assign(t, "a")
			ce.sync(t)
			ce.clk.Step(trial)
		},
		action:     func(t *testing.T, ce *crashEnv) { ce.syncIgnoringErrors(t) },
		wantActive: "a",
	},
	"reset of a config in trial": {
		prepare: func(t *testing.T, ce *crashEnv) {
			ce.onLastKnownGood(t, "a", cfgA)
			ce.configMap(t, "b", cfgB, nil)
			ce.assign(t, "b")
			ce.sync(t)
		},
		action:     func(t *testing.T, ce *crashEnv) { ce.assign(t, ""); ce.syncIgnoringErrors(t) },
		wantActive: "",
	},
	"startup repair": {
		// The commit of b was recorded, the kubelet still runs a.
		prepare: func(t *testing.T, ce *crashEnv) {
			ce.onLastKnownGood(t, "a", cfgA)
			ce.configMap(t, "b", cfgB, nil)
			ce.assign(t, "b")
			save(t, ce.env, "b", cfgB)
			st := ce.stored(t)
			now := ce.clk.Now()
			st.Assigned, st.AssignedAt = ref("b", "1"), &now
			must(t, ce.store.SetState(st))
		},
		action: func(t *testing.T, ce *crashEnv) {
			_ = ce.a.startup(context.Background())
			ce.syncIgnoringErrors(t)
		},
		wantActive: "b",
	},
	"drift reassert": {
		prepare: func(t *testing.T, ce *crashEnv) {
			ce.onLastKnownGood(t, "a", cfgA)
			path := ce.configPath
			if ce.mode == kubelet.DropIn {
				path = filepath.Join(ce.configDir, kubelet.DropInName)
			}
			must(t, os.WriteFile(path, []byte(`{`+header+`,"maxPods":77}`), 0o600))
		},
		configure:  func(a *Agent) { a.OnDrift = DriftReassert },
		action:     func(t *testing.T, ce *crashEnv) { ce.syncIgnoringErrors(t) },
		wantActive: "a",
	},
}

func TestCrashCampaign(t *testing.T) {
	quietKlog(t)
	total := 0
	var counts []string
	began := time.Now()
	for _, mode := range []kubelet.ApplyMode{kubelet.Replace, kubelet.DropIn} {
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for k := range crashScenarios {
				if !yield(k) {
					return
				}
			}
		}) {
			sc := crashScenarios[name]
			t.Run(string(mode)+"/"+name, func(t *testing.T) {
				prepared := newCrashEnv(t, t.TempDir(), mode, sc.configure)
				sc.prepare(t, prepared)
				ops := runCrashPoint(t, prepared, sc, 0)
				if ops == 0 {
					t.Fatalf("the path wrote nothing")
				}
				for k := 1; k <= ops; k++ {
					runCrashPoint(t, prepared, sc, k)
				}
				total += ops
				counts = append(counts, fmt.Sprintf("%-8s %-70s %3d", mode, name, ops))
			})
		}
	}
	t.Logf("crash points per path:\n%s", strings.Join(counts, "\n"))
	t.Logf("crash campaign: %d crash points in %s", total, time.Since(began).Round(time.Millisecond))
	if total < 1000 && !t.Failed() {
		t.Errorf("crash campaign ran %d crash points, want at least 1000", total)
	}
}

// runCrashPoint runs sc with a crash at the crashAt-th file system
// operation of its action (0: none), recovers and checks the invariants. It
// returns the number of operations the action made.
func runCrashPoint(t *testing.T, prepared *crashEnv, sc crashScenario, crashAt int) int {
	t.Helper()
	dir, err := os.MkdirTemp(crashTempBase(), "dkc-crash-")
	must(t, err)
	defer os.RemoveAll(dir)
	ce := prepared.clone(t, dir)

	crash := &atomicfiletest.FaultFS{NoSync: true}
	ce.restartAgent(t, crash)
	base := crash.Ops() // opening the store is not the path under test
	if crashAt > 0 {
		crash.CrashAt = base + crashAt
	}
	sc.action(t, ce)
	ops := crash.Ops() - base
	if crashAt > 0 && !crash.Crashed() {
		t.Fatalf("crash at %d: the action made only %d operations", crashAt, ops)
	}
	point := fmt.Sprintf("crash at operation %d of %d (%s)", crashAt, ops, lastOp(crash, base+crashAt))

	// Recovery: a new agent process, a working file system.
	ce.restartAgent(t, &atomicfiletest.FaultFS{NoSync: true})
	if err := ce.a.startup(context.Background()); err != nil {
		t.Fatalf("%s: startup: %v", point, err)
	}
	checkStoreDecodes(t, ce, point)
	checkConfigIsKnown(t, ce, point)
	checkNotBad(t, ce, sc, point+", after startup")
	for range 3 {
		ce.syncIgnoringErrors(t)
		checkNotBad(t, ce, sc, point+", after a sync")
	}
	checkStoreDecodes(t, ce, point)
	checkConfigIsKnown(t, ce, point)
	checkStatusMatchesFile(t, ce, point, sc.wantActive)
	checkNothingLeft(t, ce, point)
	return ops
}

func lastOp(f *atomicfiletest.FaultFS, crashAt int) string {
	if !f.Crashed() || crashAt > len(f.Trace) {
		return "no crash"
	}
	return f.Trace[crashAt-1]
}

// checkNotBad fails if the kubelet's config holds badPayload after its
// failure was recorded.
func checkNotBad(t *testing.T, ce *crashEnv, sc crashScenario, point string) {
	t.Helper()
	effective, err := ce.a.Writer.Effective()
	must(t, err)
	if sc.badRecorded && strings.Contains(string(effective), `"maxPods":66`) {
		t.Fatalf("%s: the kubelet's config is the one whose failure was recorded", point)
	}
}

func checkStoreDecodes(t *testing.T, ce *crashEnv, point string) {
	t.Helper()
	if _, _, err := ce.store.State(); err != nil {
		t.Fatalf("%s: record: %v", point, err)
	}
	if _, err := checkpointtest.Read(filepath.Dir(ce.store.Dir())); err != nil {
		t.Fatalf("%s: the store as a kubelet or an older dkc reads it: %v", point, err)
	}
}

// preview is what the kubelet's config holds with src applied.
func (ce *crashEnv) preview(t *testing.T, src *corev1.NodeConfigSource) []byte {
	t.Helper()
	payload, err := ce.a.payload(src)
	if err != nil {
		t.Fatalf("checkpoint of %s: %v", describe(src), err)
	}
	p, err := ce.a.Writer.Preview(payload)
	if err != nil {
		t.Fatalf("preview %s: %v", describe(src), err)
	}
	return p
}

func checkConfigIsKnown(t *testing.T, ce *crashEnv, point string) {
	t.Helper()
	st := ce.stored(t)
	effective, err := ce.a.Writer.Effective()
	if err != nil {
		t.Fatalf("%s: kubelet config: %v", point, err)
	}
	if ce.mode == kubelet.Replace && !sameJSON(readBytes(t, ce.configPath), []byte(local)) {
		// The local config is the baseline while dkc's is in the file.
		if _, ok, err := ce.store.Baseline(kubelet.BaselineName); err != nil || !ok {
			t.Fatalf("%s: dkc's config is in the file without a baseline (%v)", point, err)
		}
	}
	for _, src := range []*corev1.NodeConfigSource{nil, st.Assigned, st.LastKnownGood} {
		if (src == nil || st.Assigned == src || st.LastKnownGood == src) && sameJSON(ce.preview(t, src), effective) {
			return
		}
	}
	t.Fatalf("%s: the kubelet's config is none of local, assigned (%s), last-known-good (%s):\n%s", point, describe(st.Assigned), describe(st.LastKnownGood), effective)
}

func checkStatusMatchesFile(t *testing.T, ce *crashEnv, point, wantActive string) {
	t.Helper()
	effective, err := ce.a.Writer.Effective()
	must(t, err)
	st := ce.status(t)
	var active *corev1.NodeConfigSource
	if st != nil {
		active = st.Active
	}
	if !sameJSON(ce.preview(t, active), effective) {
		t.Fatalf("%s: status names %s as active, the kubelet's config holds:\n%s", point, describe(active), effective)
	}
	got := ""
	if active != nil {
		got = active.ConfigMap.Name
	}
	if got != wantActive {
		t.Fatalf("%s: after recovery the node runs %q, want %q (status %+v)", point, got, wantActive, st)
	}
	if _, err := source.History(ce.node(t)); err != nil {
		t.Fatalf("%s: history: %v", point, err)
	}
}

func checkNothingLeft(t *testing.T, ce *crashEnv, point string) {
	t.Helper()
	_ = filepath.WalkDir(ce.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), atomicfile.TempPrefix) {
			t.Fatalf("%s: temporary left: %s", point, p)
		}
		return err
	})
	st := ce.stored(t)
	keep := map[string]bool{}
	for _, src := range []*corev1.NodeConfigSource{st.Assigned, st.Active, st.LastKnownGood} {
		if src != nil {
			keep[string(src.ConfigMap.UID)+"/"+src.ConfigMap.ResourceVersion] = true
		}
	}
	cps := filepath.Join(ce.store.Dir(), "checkpoints")
	uids, err := os.ReadDir(cps)
	must(t, err)
	for _, u := range uids {
		rvs, err := os.ReadDir(filepath.Join(cps, u.Name()))
		must(t, err)
		if len(rvs) == 0 {
			t.Fatalf("%s: empty checkpoint dir %s left", point, u.Name())
		}
		for _, rv := range rvs {
			if !keep[u.Name()+"/"+rv.Name()] {
				t.Fatalf("%s: checkpoint %s/%s left that the record does not name", point, u.Name(), rv.Name())
			}
		}
	}
}

func readBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	return b
}

// quietKlog discards the agent's logs for the rest of t: thousands of
// crash points would print hundreds of thousands of lines.
func quietKlog(t *testing.T) {
	var fl flag.FlagSet
	klog.InitFlags(&fl)
	must(t, fl.Set("logtostderr", "false"))
	must(t, fl.Set("alsologtostderr", "false"))
	must(t, fl.Set("stderrthreshold", "FATAL"))
	klog.SetOutput(io.Discard)
	t.Cleanup(func() {
		must(t, fl.Set("logtostderr", "true"))
		klog.SetOutput(os.Stderr)
	})
}

// crashTempBase is where crash points keep their files: tmpfs when there
// is one, since a campaign creates and removes thousands of small trees.
func crashTempBase() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if f, err := os.CreateTemp("/dev/shm", "dkc-probe-"); err == nil {
			f.Close()
			os.Remove(f.Name())
			return "/dev/shm"
		}
	}
	return ""
}
