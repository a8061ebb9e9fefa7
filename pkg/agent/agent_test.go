package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kubectl-dkc/dkc/pkg/checkpoint"
	"github.com/kubectl-dkc/dkc/pkg/checkpoint/checkpointtest"
	"github.com/kubectl-dkc/dkc/pkg/kubeclient/adapt"
	"github.com/kubectl-dkc/dkc/pkg/kubelet"
	kfake "github.com/kubectl-dkc/dkc/pkg/kubelet/fake"
	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

const (
	nodeName = "n1"
	header   = `"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1"`
	local    = `{` + header + `,"maxPods":110}`
	cfgA     = `{` + header + `,"maxPods":42}`
	cfgB     = `{` + header + `,"maxPods":43}`
	trial    = 10 * time.Minute
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// env is an Agent on fakes: a fake clientset holding the Node and its
// ConfigMaps, a real checkpoint store in a temp dir, a FakeClock.
type env struct {
	a        *Agent
	client   *fake.Clientset
	writer   *kfake.FakeWriter
	restart  *kfake.FakeRestarter
	prober   *kfake.FakeProber
	clk      *testingclock.FakeClock
	recorder *record.FakeRecorder
	store    *checkpoint.Store
	dir      string
	pods     *fakePods
}

// readyNode is the env's Node: Ready, as a kubelet that runs reports it.
func readyNode() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, UID: "node-uid"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

// fakePods is a podView holding the pods bound to the node: list, or what
// onList returns for the n-th list (from 1), when set.
type fakePods struct {
	mu      sync.Mutex
	list    []*corev1.Pod
	onList  func(n int) []*corev1.Pod
	lists   int
	err     error
	stopped map[types.UID]string
}

func (f *fakePods) pods() ([]*corev1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.onList != nil {
		return f.onList(f.lists), f.err
	}
	return f.list, f.err
}

func (f *fakePods) stoppedSince(time.Time) map[types.UID]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stopped
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	clk := testingclock.NewFakeClock(t0)
	store, err := checkpoint.Open(dir, clk)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{
		client:   fake.NewClientset(readyNode()),
		writer:   &kfake.FakeWriter{WriterMode: kubelet.Replace, LocalConfig: []byte(local), Current: []byte(local)},
		restart:  &kfake.FakeRestarter{},
		prober:   &kfake.FakeProber{},
		clk:      clk,
		recorder: record.NewFakeRecorder(100),
		store:    store,
		dir:      dir,
		pods:     &fakePods{},
	}
	e.a = e.newAgent()
	return e
}

// newAgent is a new agent process on the same node, store and kubelet.
func (e *env) newAgent() *Agent {
	a := &Agent{
		Client:         adapt.Clientset(e.client),
		NodeName:       nodeName,
		Store:          e.store,
		Writer:         e.writer,
		Restarter:      e.restart,
		Prober:         e.prober,
		Clock:          e.clk,
		Recorder:       e.recorder,
		KubeletRootDir: e.dir,
		HealthTimeout:  time.Minute,
		TrialDuration:  trial,
		podView:        e.pods,
		// The host's memory and disk are not the fake node's.
		Signals: func() map[string]kubeletconfig.Signal { return nil },
	}
	a.setDefaults()
	return a
}

// configMap creates or updates the ConfigMap cm with the kubelet key.
func (e *env) configMap(t *testing.T, name, payload string, annotations map[string]string) {
	t.Helper()
	ctx := context.Background()
	cms := e.client.CoreV1().ConfigMaps("kube-system")
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", UID: types.UID("uid-" + name)}}
		cm.ResourceVersion = "1"
		cm.Data = map[string]string{"kubelet": payload}
		cm.Annotations = annotations
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	cm.Data = map[string]string{"kubelet": payload}
	cm.Annotations = annotations
	cm.ResourceVersion = cm.ResourceVersion + "1"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// assign points the node's annotation at ConfigMap name ("" removes it),
// pinned, as kubectl dkc assign pins, to the ConfigMap's bytes now, with
// the unsafe classes allowUnsafe. A ConfigMap that does not exist yet is
// assigned unpinned.
func (e *env) assign(t *testing.T, name string, allowUnsafe ...string) {
	t.Helper()
	var src *corev1.NodeConfigSource
	var pin *source.Pin
	if name != "" {
		src = &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: name, KubeletConfigKey: "kubelet"}}
		if cm, err := e.getConfigMap("kube-system", name); err == nil {
			pin = source.NewPin(src, []byte(cm.Data["kubelet"]), allowUnsafe)
		}
	}
	e.assignPinned(t, src, pin)
}

// assignPinned writes the assignment src with exactly pin.
func (e *env) assignPinned(t *testing.T, src *corev1.NodeConfigSource, pin *source.Pin) {
	t.Helper()
	patch, err := source.AssignPatch(source.Annotation, src, pin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CoreV1().Nodes().Patch(context.Background(), nodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (e *env) node(t *testing.T) *corev1.Node {
	t.Helper()
	n, err := e.client.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (e *env) getConfigMap(ns, name string) (*corev1.ConfigMap, error) {
	return e.client.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
}

// getter is a configMapGetter with no cache: every read is fresh.
func (e *env) getter(ns, name string, _ bool) (*corev1.ConfigMap, error) {
	return e.getConfigMap(ns, name)
}

func (e *env) sync(t *testing.T) time.Duration {
	t.Helper()
	requeue, err := e.a.sync(context.Background(), e.node(t), e.getter)
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	return requeue
}

// status is the node's reported status.
func (e *env) status(t *testing.T) *corev1.NodeConfigStatus {
	t.Helper()
	st, _, err := source.Status(e.node(t))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// condition is the node's condition as "Status Reason".
func (e *env) condition(t *testing.T) string {
	t.Helper()
	c := source.Condition(e.node(t).Status.Conditions)
	if c == nil {
		return ""
	}
	return string(c.Status) + " " + c.Reason
}

// events drains the recorded events, each as "Type Reason".
// onLastKnownGood applies ConfigMap name with payload, lets it pass its
// trial so it becomes last-known-good, and drains the events of that.
func (e *env) onLastKnownGood(t *testing.T, name, payload string) {
	t.Helper()
	e.configMap(t, name, payload, nil)
	e.assign(t, name)
	e.sync(t)
	e.clk.Step(trial)
	e.sync(t)
	e.events()
}

func (e *env) events() []string {
	var out []string
	for {
		select {
		case ev := <-e.recorder.Events:
			f := strings.SplitN(ev, " ", 3)
			out = append(out, f[0]+" "+f[1])
		default:
			return out
		}
	}
}

func ref(name, rv string) *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: "kube-system", Name: name, KubeletConfigKey: "kubelet", UID: types.UID("uid-" + name), ResourceVersion: rv,
	}}
}

func (e *env) stored(t *testing.T) checkpoint.State {
	t.Helper()
	st, err := e.a.state()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func diff(t *testing.T, what string, want, got any) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

func TestApply(t *testing.T) {
	e := newEnv(t)
	e.configMap(t, "a", cfgA, nil)
	e.assign(t, "a")

	requeue := e.sync(t)

	diff(t, "requeue (the trial's next check)", trialCheckInterval, requeue)
	diff(t, "kubelet config", cfgA, string(e.writer.Current))
	diff(t, "restarter calls", []string{"Restart"}, e.restart.CallsSnapshot())
	diff(t, "probes", 1, len(e.prober.Expectations))
	diff(t, "status", &corev1.NodeConfigStatus{Assigned: ref("a", "1"), Active: ref("a", "1")}, e.status(t))
	diff(t, "condition", "True Trial", e.condition(t))
	diff(t, "events", []string{"Normal Applied"}, e.events())

	// A second sync (the agent's own status patch) changes nothing.
	diff(t, "requeue", trialCheckInterval, e.sync(t))
	diff(t, "restarter calls", []string{"Restart"}, e.restart.CallsSnapshot())
	diff(t, "events", []string(nil), e.events())
}

func TestRefusedBeforeKubelet(t *testing.T) {
	tests := map[string]struct {
		payload     string
		annotations map[string]string
		allowUnsafe []string
		wantError   string
		// wantEvents come before the Warning Refused.
		wantEvents []string
	}{
		"missing kind": {
			payload:   `{"apiVersion":"kubelet.config.k8s.io/v1beta1","maxPods":42}`,
			wantError: `failed to load config, see Kubelet log for details: missing "kind": add kind: KubeletConfiguration`,
		},
		"unknown field": {
			payload:   `{` + header + `,"maxPod":42}`,
			wantError: `failed to load config, see Kubelet log for details: unknown field "maxPod"`,
		},
		"invalid value": {
			payload:   `{` + header + `,"maxPods":-1}`,
			wantError: `failed to validate config, see Kubelet log for details: maxPods: must be >= 0, got -1`,
		},
		"unsafe change without opt-in": {
			payload:   `{` + header + `,"maxPods":110,"cpuManagerPolicy":"static"}`,
			wantError: `failed to validate config, see Kubelet log for details: refused unsafe change: cpuManagerPolicy "" -> "static" (resource-managers); to allow it, assign again with --allow-unsafe=resource-managers`,
		},
		"security weakening with the assigner's opt-in for another class": {
			payload:     `{` + header + `,"maxPods":110,"readOnlyPort":10255}`,
			allowUnsafe: []string{"resource-managers"},
			wantError:   `failed to validate config, see Kubelet log for details: refused unsafe change: readOnlyPort "" -> "10255" (security); to allow it, assign again with --allow-unsafe=security`,
		},
		// The ConfigMap's writer opts in to nothing, not even with "*".
		"host access with the ConfigMap's opt-in annotation": {
			payload:     `{` + header + `,"maxPods":110,"staticPodURL":"http://198.51.100.9/pods.yaml"}`,
			annotations: map[string]string{source.AllowUnsafeAnnotation: "*"},
			wantError:   `failed to validate config, see Kubelet log for details: refused unsafe change: staticPodURL "" -> "http://198.51.100.9/pods.yaml" (host-access); to allow it, assign again with --allow-unsafe=host-access`,
			wantEvents:  []string{"Warning IgnoredAnnotation"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.configMap(t, "a", tc.payload, tc.annotations)
			e.assign(t, "a", tc.allowUnsafe...)

			e.sync(t)

			diff(t, "status", &corev1.NodeConfigStatus{Assigned: ref("a", "1"), Error: tc.wantError}, e.status(t))
			diff(t, "kubelet config", local, string(e.writer.Current))
			diff(t, "restarter calls", []string(nil), e.restart.CallsSnapshot())
			diff(t, "condition", "False Refused", e.condition(t))
			diff(t, "events", append(tc.wantEvents, "Warning Refused"), e.events())
			diff(t, "meta/assigned", (*corev1.NodeConfigSource)(nil), e.stored(t).Assigned)
			// Bytes that failed their checks never reach the node's disk.
			if _, err := os.Stat(filepath.Join(e.store.Dir(), "checkpoints", "uid-a")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("refused config checkpointed: %v", err)
			}

			// Not checked or reported again until it changes.
			e.sync(t)
			diff(t, "events", []string(nil), e.events())
		})
	}
}

func TestDownloadError(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "x",
		errors.New(`User "system:serviceaccount:kube-system:dkc-agent" cannot list resource "configmaps" in API group "" in the namespace "default"`))
	tests := map[string]struct {
		// err is what the ConfigMap's informer says until the ConfigMap
		// becomes readable; nil: the fake clientset's NotFound.
		err       error
		wantError string
	}{
		"not found": {
			wantError: "failed to sync: failed to download config, see Kubelet log for details: configmap kube-system/x not found",
		},
		"forbidden": {
			err:       &listError{err: fmt.Errorf("failed to list *v1.ConfigMap: %w", forbidden)},
			wantError: `failed to sync: failed to download config, see Kubelet log for details: configmaps "x" is forbidden: User "system:serviceaccount:kube-system:dkc-agent" cannot list resource "configmaps" in API group "" in the namespace "default"`,
		},
		"apiserver unreachable": {
			err:       &listError{err: errors.New("failed to list *v1.ConfigMap: dial tcp 127.0.0.1:1: connect: connection refused")},
			wantError: "failed to sync: failed to download config, see Kubelet log for details: failed to list *v1.ConfigMap: dial tcp 127.0.0.1:1: connect: connection refused",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.onLastKnownGood(t, "a", cfgA)
			before := e.stored(t)
			readable := false
			get := func(ns, name string, _ bool) (*corev1.ConfigMap, error) {
				if tc.err != nil && !readable {
					return nil, tc.err
				}
				return e.getConfigMap(ns, name)
			}
			syncWith := func() {
				t.Helper()
				if _, err := e.a.sync(context.Background(), e.node(t), get); err != nil {
					t.Fatalf("sync: %v", err)
				}
			}
			e.assign(t, "x")

			syncWith()

			diff(t, "status", &corev1.NodeConfigStatus{Assigned: ref("a", "1"), Active: ref("a", "1"), LastKnownGood: ref("a", "1"), Error: tc.wantError}, e.status(t))
			diff(t, "condition", "False Failed", e.condition(t))
			diff(t, "events", []string{"Warning Failed"}, e.events())
			diff(t, "kubelet config", cfgA, string(e.writer.Current))
			diff(t, "restarter calls", []string{"Restart"}, e.restart.CallsSnapshot())
			after := e.stored(t)
			diff(t, "meta/assigned", before.Assigned, after.Assigned)
			diff(t, "meta/last-known-good", before.LastKnownGood, after.LastKnownGood)
			diff(t, "last error", before.AssignedError(), after.AssignedError())

			// Each retry keeps the status and records no other Event.
			syncWith()
			syncWith()
			diff(t, "events", []string(nil), e.events())
			diff(t, "status error", tc.wantError, e.status(t).Error)

			// The ConfigMap becomes readable, and the operator assigns
			// (pins) it: the node converges.
			readable = true
			e.configMap(t, "x", cfgB, nil)
			e.assign(t, "x")
			syncWith()
			diff(t, "status", &corev1.NodeConfigStatus{Assigned: ref("x", "1"), Active: ref("x", "1"), LastKnownGood: ref("a", "1")}, e.status(t))
			diff(t, "kubelet config", cfgB, string(e.writer.Current))
			diff(t, "events", []string{"Normal Applied"}, e.events())
		})
	}
}

func TestUnsafeChangeWithOptIn(t *testing.T) {
	e := newEnv(t)
	state := filepath.Join(e.dir, cpuManagerStateFile)
	memState := filepath.Join(e.dir, memoryManagerStateFile)
	for _, f := range []string{state, memState} {
		if err := os.WriteFile(f, []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	stateGone := false
	e.restart.OnCall = func(method string) {
		if method == "Start" {
			_, err := os.Stat(state)
			stateGone = errors.Is(err, os.ErrNotExist)
		}
	}
	payload := `{` + header + `,"maxPods":110,"cpuManagerPolicy":"static"}`
	e.configMap(t, "a", payload, nil)
	e.assign(t, "a", "resource-managers")

	e.sync(t)

	diff(t, "restarter calls", []string{"Stop", "Start"}, e.restart.CallsSnapshot())
	diff(t, "cpu_manager_state removed while stopped", true, stateGone)
	if _, err := os.Stat(memState); err != nil {
		t.Errorf("memory_manager_state removed without a memory manager policy change: %v", err)
	}
	diff(t, "status", &corev1.NodeConfigStatus{Assigned: ref("a", "1"), Active: ref("a", "1")}, e.status(t))
}

func TestRollbackToLastKnownGood(t *testing.T) {
	e := newEnv(t)
	e.onLastKnownGood(t, "a", cfgA)
	diff(t, "last-known-good", ref("a", "1"), e.stored(t).LastKnownGood)

	e.prober.Results = []error{errors.New("healthz: connection refused")}
	e.configMap(t, "b", cfgB, nil)
	e.assign(t, "b")
	e.sync(t)

	wantErr := `failed to validate config, see Kubelet log for details: kubelet failed the health gate on ConfigMap kube-system/b key "kubelet" (resourceVersion 1), rolled back to ConfigMap kube-system/a key "kubelet" (resourceVersion 1): health check: healthz: connection refused`
	diff(t, "status", &corev1.NodeConfigStatus{Assigned: ref("b", "1"), Active: ref("a", "1"), LastKnownGood: ref("a", "1"), Error: wantErr}, e.status(t))
	diff(t, "kubelet config", cfgA, string(e.writer.Current))
	diff(t, "restarter calls", []string{"Restart", "Restart", "Restart"}, e.restart.CallsSnapshot())
	diff(t, "condition", "False RolledBack", e.condition(t))
	diff(t, "events", []string{"Warning RolledBack"}, e.events())
	diff(t, "meta/last-error", wantErr, e.stored(t).AssignedError())

	// The failure is recorded: no retry, same report.
	e.sync(t)
	diff(t, "restarter calls", 3, len(e.restart.CallsSnapshot()))
	diff(t, "status", &corev1.NodeConfigStatus{Assigned: ref("b", "1"), Active: ref("a", "1"), LastKnownGood: ref("a", "1"), Error: wantErr}, e.status(t))

	// A fixed ConfigMap, assigned again, is applied.
	e.configMap(t, "b", `{`+header+`,"maxPods":44}`, nil)
	e.assign(t, "b")
	e.sync(t)
	diff(t, "status", &corev1.NodeConfigStatus{Assigned: ref("b", "11"), Active: ref("b", "11"), LastKnownGood: ref("a", "1")}, e.status(t))
	diff(t, "meta/last-error", "", e.stored(t).AssignedError())
}

func TestTrialPromotion(t *testing.T) {
	e := newEnv(t)
	e.configMap(t, "a", cfgA, nil)
	e.assign(t, "a")
	diff(t, "requeue", trialCheckInterval, e.sync(t))

	e.clk.Step(trial - time.Second)
	diff(t, "requeue before the trial ends", time.Second, e.sync(t))
	diff(t, "last-known-good", (*corev1.NodeConfigSource)(nil), e.stored(t).LastKnownGood)

	e.clk.Step(time.Second)
	diff(t, "requeue after promotion", time.Duration(0), e.sync(t))
	diff(t, "status", &corev1.NodeConfigStatus{Assigned: ref("a", "1"), Active: ref("a", "1"), LastKnownGood: ref("a", "1")}, e.status(t))
	diff(t, "condition", "True Applied", e.condition(t))
}

// The trial clock is meta/assigned-at: a restarted agent does not start the
// trial over (kubernetes#57808).
func TestTrialSurvivesAgentRestart(t *testing.T) {
	e := newEnv(t)
	e.configMap(t, "a", cfgA, nil)
	e.assign(t, "a")
	e.sync(t)
	e.clk.Step(6 * time.Minute)

	e.a = e.newAgent()
	if err := e.a.startup(context.Background()); err != nil {
		t.Fatal(err)
	}
	diff(t, "requeue after restart", trialCheckInterval, e.sync(t))
	diff(t, "probes (one verification after the restart)", 2, len(e.prober.Expectations))
	diff(t, "restarter calls", []string{"Restart"}, e.restart.CallsSnapshot())

	e.clk.Step(4 * time.Minute)
	e.sync(t)
	diff(t, "last-known-good", ref("a", "1"), e.stored(t).LastKnownGood)
}

// Without the apiserver, startup makes the kubelet's config the one the
// store names, restarting the kubelet only when it rewrote the config.
func TestStartupWithoutAPI(t *testing.T) {
	tests := map[string]struct {
		// setup leaves the store and the kubelet's config as a crash of
		// an older dkc would: the store without a record, which startup
		// adopts.
		setup        func(t *testing.T, e *env)
		wantConfig   string
		wantRestarts []string
	}{
		"assigned recorded, config not written yet": {
			setup: func(t *testing.T, e *env) {
				save(t, e, "a", cfgA)
				e.writeOlderStore(t, checkpointtest.Layout{Assigned: ref("a", "1")})
			},
			wantConfig:   cfgA,
			wantRestarts: []string{"Restart"},
		},
		"assigned recorded as failed: last-known-good": {
			setup: func(t *testing.T, e *env) {
				save(t, e, "a", cfgA)
				save(t, e, "b", cfgB)
				e.writeOlderStore(t, checkpointtest.Layout{Assigned: ref("b", "1"), LastKnownGood: ref("a", "1"),
					LastError: "failed to validate config, see Kubelet log for details: x"})
				e.writer.Current = []byte(cfgB)
			},
			wantConfig:   cfgA,
			wantRestarts: []string{"Restart"},
		},
		"assigned recorded as failed, local last-known-good": {
			setup: func(t *testing.T, e *env) {
				save(t, e, "b", cfgB)
				e.writeOlderStore(t, checkpointtest.Layout{Assigned: ref("b", "1"),
					LastError: "failed to validate config, see Kubelet log for details: x"})
				e.writer.Current, e.writer.Owned = []byte(cfgB), true
			},
			wantConfig:   local,
			wantRestarts: []string{"Restart"},
		},
		"consistent: no restart": {
			setup: func(t *testing.T, e *env) {
				save(t, e, "a", cfgA)
				e.writeOlderStore(t, checkpointtest.Layout{Assigned: ref("a", "1")})
				e.writer.Current = []byte(cfgA)
			},
			wantConfig: cfgA,
		},
		"reset recorded, config not restored yet": {
			setup: func(t *testing.T, e *env) {
				save(t, e, "a", cfgA)
				e.writeOlderStore(t, checkpointtest.Layout{LastKnownGood: ref("a", "1")})
				e.writer.Current, e.writer.Owned = []byte(cfgA), true
			},
			wantConfig:   local,
			wantRestarts: []string{"Restart"},
		},
		"reset of a config in trial recorded, config not restored yet": {
			// The store reads as never assigned, but dkc's config is on disk.
			setup: func(t *testing.T, e *env) {
				e.writer.Current, e.writer.Owned = []byte(cfgA), true
			},
			wantConfig:   local,
			wantRestarts: []string{"Restart"},
		},
		"never assigned: the operator's config is left alone": {
			setup: func(t *testing.T, e *env) {
				e.writer.Current = []byte(cfgB)
			},
			wantConfig: cfgB,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			tc.setup(t, e)
			// No apiserver: every request fails.
			e.client.PrependReactor("*", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, errors.New("connection refused")
			})

			if err := e.a.startup(context.Background()); err != nil {
				t.Fatal(err)
			}

			diff(t, "kubelet config", tc.wantConfig, string(e.writer.Current))
			diff(t, "restarter calls", tc.wantRestarts, e.restart.CallsSnapshot())
		})
	}
}

func TestReset(t *testing.T) {
	e := newEnv(t)
	e.onLastKnownGood(t, "a", cfgA)

	e.assign(t, "")
	e.sync(t)

	diff(t, "kubelet config", local, string(e.writer.Current))
	diff(t, "restarter calls", []string{"Restart", "Restart"}, e.restart.CallsSnapshot())
	diff(t, "status", (*corev1.NodeConfigStatus)(nil), e.status(t))
	if _, ok := e.node(t).Annotations[source.StatusAnnotation]; ok {
		t.Errorf("status annotation still set")
	}
	diff(t, "condition", "True Reset", e.condition(t))
	diff(t, "events", []string{"Normal Reset"}, e.events())
	st := e.stored(t)
	if st.Assigned != nil || st.LastKnownGood != nil {
		t.Errorf("store after reset: assigned %v, last-known-good %v; want both local", st.Assigned, st.LastKnownGood)
	}
	if _, err := e.store.LoadKey(ref("a", "1")); err == nil || err.Error() != `checkpoint "uid-a/1": not found` {
		t.Errorf("checkpoint of a after reset: %v; want it garbage-collected", err)
	}

	// Nothing more to do.
	e.sync(t)
	diff(t, "restarter calls", 2, len(e.restart.CallsSnapshot()))
	diff(t, "events", []string(nil), e.events())
}

func save(t *testing.T, e *env, name, payload string) {
	t.Helper()
	must(t, e.store.Save(types.UID("uid-"+name), "1", map[string][]byte{"kubelet": []byte(payload)}))
}

// writeOlderStore makes e's store one that an older dkc left: no record,
// the meta files of l, and the trial of l.Assigned started now, as that
// dkc recorded an assignment.
func (e *env) writeOlderStore(t *testing.T, l checkpointtest.Layout) {
	t.Helper()
	if l.Assigned != nil {
		now := e.clk.Now()
		l.AssignedAt = &now
	}
	checkpointtest.Write(t, filepath.Dir(e.store.Dir()), l)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// With the real replace writer and store, the baseline is the local config
// at the moment dkc takes over from it: an operator's edit made while the
// node runs its local config (after a reset, or after a rollback to a local
// last-known-good config) survives a later assign and reset.
func TestReplaceBaselineFollowsOperatorEdits(t *testing.T) {
	const edited = `{` + header + `,"maxPods":111}`
	tests := map[string]struct {
		// toLocal puts the node on its local config after assigning a.
		toLocal   func(t *testing.T, e *env)
		wantStore checkpoint.State
	}{
		"after a reset": {
			toLocal: func(t *testing.T, e *env) {
				e.sync(t)
				diff(t, "config on a", cfgA, readFile(t, e.a.Writer.(*kubelet.ReplaceWriter).ConfigPath))
				e.assign(t, "")
				e.sync(t)
			},
			wantStore: checkpoint.State{},
		},
		"after a rollback to local": {
			toLocal: func(t *testing.T, e *env) {
				e.prober.Results = []error{errors.New("healthz: connection refused")}
				e.sync(t)
				diff(t, "active after the rollback", (*corev1.NodeConfigSource)(nil), e.status(t).Active)
			},
			wantStore: checkpoint.State{Assigned: ref("a", "1")},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			path := filepath.Join(e.dir, "config.json")
			must(t, os.WriteFile(path, []byte(local), 0o600))
			e.a.Writer = kubelet.NewReplaceWriter(path, e.store)
			e.configMap(t, "a", cfgA, nil)
			e.configMap(t, "b", cfgB, nil)
			e.assign(t, "a")

			tc.toLocal(t, e)
			diff(t, "config on the local config", local, readFile(t, path))
			if _, ok, err := e.store.Baseline(kubelet.BaselineName); ok || err != nil {
				t.Errorf("baseline on the local config: kept %v (%v), want removed", ok, err)
			}
			st := e.stored(t)
			diff(t, "assigned", tc.wantStore.Assigned, st.Assigned)

			must(t, os.WriteFile(path, []byte(edited), 0o600)) // the operator
			e.assign(t, "b")
			e.sync(t)
			diff(t, "config on b", cfgB, readFile(t, path))
			e.assign(t, "")
			e.sync(t)
			diff(t, "config after the reset", edited, readFile(t, path))
		})
	}
}

// A reset of a config in its trial records the store as local before it
// restores the file; an agent killed in between restores it at startup.
func TestStartupFinishesInterruptedReset(t *testing.T) {
	e := newEnv(t)
	path := filepath.Join(e.dir, "config.json")
	must(t, os.WriteFile(path, []byte(local), 0o600))
	e.a.Writer = kubelet.NewReplaceWriter(path, e.store)
	e.configMap(t, "a", cfgA, nil)
	e.assign(t, "a")
	e.sync(t)
	diff(t, "config on a", cfgA, readFile(t, path))
	// The reset's first write (the record drops the assignment but keeps
	// the config last written), then the crash.
	must(t, e.store.SetState(checkpoint.State{Active: ref("a", "1")}))

	e.a = e.newAgent()
	e.a.Writer = kubelet.NewReplaceWriter(path, e.store)
	must(t, e.a.startup(context.Background()))

	diff(t, "config after startup", local, readFile(t, path))
	diff(t, "restarter calls", []string{"Restart", "Restart"}, e.restart.CallsSnapshot())
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestConfigMapWatch runs the assigned ConfigMap's informer on a fake
// clientset: a list that fails shows as a *listError (and queues the node),
// the informer retries with backoff, and the first successful list queues
// the node again, whether the ConfigMap exists or not.
func TestConfigMapWatch(t *testing.T) {
	tests := map[string]struct {
		// create the ConfigMap when the list starts to succeed.
		create     bool
		wantDetail string
		wantErr    string
	}{
		"forbidden, then granted, the ConfigMap exists": {
			create:     true,
			wantDetail: `configmaps "x" is forbidden: User "system:serviceaccount:kube-system:dkc-agent" cannot list resource "configmaps" in API group "" in the namespace "default"`,
		},
		"forbidden, then granted, the ConfigMap does not exist": {
			wantDetail: `configmaps "x" is forbidden: User "system:serviceaccount:kube-system:dkc-agent" cannot list resource "configmaps" in API group "" in the namespace "default"`,
			wantErr:    `configmap "x" not found`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset()
			var granted atomic.Bool
			for _, verb := range []string{"list", "get"} {
				client.PrependReactor(verb, "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
					if granted.Load() {
						return false, nil, nil
					}
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "x",
						errors.New(`User "system:serviceaccount:kube-system:dkc-agent" cannot list resource "configmaps" in API group "" in the namespace "default"`))
				})
			}
			queued := make(chan struct{}, 100)
			w := &configMapWatch{client: adapt.Clientset(client), handler: cache.ResourceEventHandlerFuncs{}, enqueue: func() { queued <- struct{}{} }}
			t.Cleanup(w.stop)
			wait := func(what string) {
				t.Helper()
				select {
				case <-queued:
				case <-time.After(10 * time.Second):
					t.Fatalf("timed out waiting for the node to be queued: %s", what)
				}
			}

			var lerr *listError
			if _, err := w.get("default", "x", false); !errors.Is(err, errNotSynced) && !errors.As(err, &lerr) {
				t.Fatalf("first get: error %v, want %v or a *listError", err, errNotSynced)
			}
			wait("the list failed")
			_, err := w.get("default", "x", false)
			if !errors.As(err, &lerr) {
				t.Fatalf("get after a failed list: error %v, want a *listError", err)
			}
			diff(t, "detail", tc.wantDetail, lerr.detail())

			if tc.create {
				if _, err := client.CoreV1().ConfigMaps("default").Create(context.Background(),
					&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "default"}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			granted.Store(true)
			// The informer retries after its backoff (0.8 s at first).
			deadline := time.Now().Add(10 * time.Second)
			for {
				wait("the list succeeded")
				cm, err := w.get("default", "x", false)
				if errors.As(err, &lerr) && time.Now().Before(deadline) {
					continue // a retry failed before the grant
				}
				gotErr := ""
				if err != nil {
					gotErr = err.Error()
				}
				diff(t, "error", tc.wantErr, gotErr)
				if tc.create && (cm == nil || cm.Name != "x") {
					t.Errorf("get returned %v, want ConfigMap x", cm)
				}
				if !tc.create && !apierrors.IsNotFound(err) {
					t.Errorf("error %v is not NotFound", err)
				}
				break
			}
		})
	}
}

// TestConfigMapWatchFirstGet: the first get of a new ConfigMap returns it
// at once, from a GET, without waiting for an informer; the informer starts
// only with watch (after the sync), once its start is due (watchDelay), and
// from then on serves get, with changes made in between. Until it has
// listed, that one GET answers.
func TestConfigMapWatchFirstGet(t *testing.T) {
	client := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "kube-system", ResourceVersion: "7"}})
	queued := make(chan struct{}, 10)
	clk := testingclock.NewFakeClock(time.Now())
	w := &configMapWatch{client: adapt.Clientset(client), handler: cache.ResourceEventHandlerFuncs{}, enqueue: func() { queued <- struct{}{} }, clock: clk}
	t.Cleanup(w.stop)
	if _, err := w.get("kube-system", "missing", false); !apierrors.IsNotFound(err) {
		t.Errorf("first get of a missing ConfigMap: %v, want NotFound", err)
	}
	cm, err := w.get("kube-system", "x", false)
	if err != nil {
		t.Fatalf("first get: %v, want the ConfigMap", err)
	}
	diff(t, "resourceVersion", "7", cm.ResourceVersion)
	// The next sync, before the informer runs: the same answer, no GET.
	if again, err := w.get("kube-system", "x", false); err != nil || again.ResourceVersion != "7" {
		t.Fatalf("second get before the informer: %v, %v; want the ConfigMap of the first", again, err)
	}
	listsAndWatches := func() (n int) {
		for _, a := range client.Actions() {
			if a.GetResource().Resource == "configmaps" && (a.GetVerb() == "list" || a.GetVerb() == "watch") {
				n++
			}
		}
		return n
	}
	if n := listsAndWatches(); n != 0 {
		t.Errorf("%d lists or watches of ConfigMaps before watch, want none during the sync", n)
	}

	// Changed between the sync's GET and the informer's start.
	cm.Data, cm.ResourceVersion = map[string]string{"kubelet": "changed"}, "8"
	if _, err := client.CoreV1().ConfigMaps("kube-system").Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The first watch schedules the start, spread over the fleet; a sync
	// before it is due starts nothing.
	due, err := w.watch()
	if err != nil {
		t.Fatal(err)
	}
	if due < watchDelay || due >= watchDelay+watchSpread {
		t.Fatalf("first watch: due in %s, want within [%s, %s)", due, watchDelay, watchDelay+watchSpread)
	}
	clk.Step(due / 2)
	if again, err := w.watch(); err != nil || again != due-due/2 {
		t.Fatalf("watch before it is due: due in %s, %v; want %s", again, err, due-due/2)
	}
	if n := listsAndWatches(); n != 0 {
		t.Errorf("%d lists or watches of ConfigMaps before the watch is due, want none", n)
	}
	clk.Step(due - due/2)
	if again, err := w.watch(); err != nil || again != 0 {
		t.Fatalf("watch when due: due in %s, %v; want 0, started", again, err)
	}
	select {
	case <-queued:
	case <-time.After(10 * time.Second):
		t.Fatal("the informer's first sync did not queue the node")
	}
	if n := listsAndWatches(); n == 0 {
		t.Error("no list or watch of ConfigMaps after watch")
	}
	got, err := w.get("kube-system", "x", false)
	if err != nil {
		t.Fatalf("get after the informer synced: %v", err)
	}
	diff(t, "resourceVersion after the informer synced", "8", got.ResourceVersion)
	// A fresh get reads past the informer's cache.
	fresh, err := w.get("kube-system", "x", true)
	if err != nil {
		t.Fatalf("fresh get: %v", err)
	}
	diff(t, "resourceVersion of the fresh get", "8", fresh.ResourceVersion)
	var gets []string
	for _, a := range client.Actions() {
		if get, ok := a.(k8stesting.GetActionImpl); ok && get.GetResource().Resource == "configmaps" {
			gets = append(gets, get.Name+"@"+get.GetOptions.ResourceVersion)
		}
	}
	// The first get of each name from the apiserver's watch cache
	// (resourceVersion 0), none from the informer's cache, and the fresh
	// one a quorum read.
	diff(t, "GETs, name@resourceVersion", []string{"missing@0", "x@0", "x@"}, gets)
}
