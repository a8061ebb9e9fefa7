package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/pkg/status"
)

func cm(name string) *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: source.DefaultNamespace, Name: name, KubeletConfigKey: source.DefaultKey,
	}}
}

func readyNode(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
		}},
	}
}

func TestOrder(t *testing.T) {
	zone := "topology.kubernetes.io/zone"
	nodes := []corev1.Node{
		*readyNode("c", map[string]string{zone: "a"}),
		*readyNode("a", map[string]string{zone: "b"}),
		*readyNode("b", nil),
		*readyNode("d", map[string]string{zone: "a"}),
	}
	tests := map[string]struct {
		label string
		want  []string
	}{
		"by name":              {want: []string{"a", "b", "c", "d"}},
		"by label, unset last": {label: zone, want: []string{"c", "d", "a", "b"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Order(nodes, tc.label)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseMaxUnavailableAndBudget(t *testing.T) {
	tests := map[string]struct {
		in      string
		total   int
		want    int
		wantErr string
	}{
		"count":               {in: "2", total: 10, want: 2},
		"percent":             {in: "10%", total: 1000, want: 100},
		"percent rounds down": {in: "25%", total: 7, want: 1},
		"percent at least 1":  {in: "1%", total: 3, want: 1},
		"zero":                {in: "0", wantErr: `invalid --max-unavailable "0": must be at least 1 (or 1%)`},
		"word":                {in: "all", wantErr: `invalid --max-unavailable "all": want a count such as 1 or a percentage such as 10%`},
		"negative":            {in: "-1", wantErr: `invalid --max-unavailable "-1": must be at least 1 (or 1%)`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v, err := ParseMaxUnavailable(tc.in)
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if err != nil {
				return
			}
			if got := Budget(v, tc.total); got != tc.want {
				t.Errorf("Budget = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestWaves(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	soak := metav1.Duration{Duration: time.Minute}
	tests := map[string]struct {
		spec Spec
		want []Wave
	}{
		"with a soak, canary 1, budget 2: waves of the budget": {
			spec: Spec{Nodes: nodes, Canary: 1, MaxUnavailable: intstr.FromInt32(2), Soak: soak},
			want: []Wave{{0, true, []string{"n1"}}, {1, false, []string{"n2", "n3"}}, {2, false, []string{"n4", "n5"}}, {3, false, []string{"n6"}}},
		},
		"with a soak, no canary, 50%": {
			spec: Spec{Nodes: nodes, MaxUnavailable: intstr.FromString("50%"), Soak: soak},
			want: []Wave{{0, false, []string{"n1", "n2", "n3"}}, {1, false, []string{"n4", "n5", "n6"}}},
		},
		"with no soak, canary 1, budget 2: the canary, then one wave that the budget slides over": {
			spec: Spec{Nodes: nodes, Canary: 1, MaxUnavailable: intstr.FromInt32(2)},
			want: []Wave{{0, true, []string{"n1"}}, {1, false, []string{"n2", "n3", "n4", "n5", "n6"}}},
		},
		"with no soak and no canary: one wave": {
			spec: Spec{Nodes: nodes, MaxUnavailable: intstr.FromString("50%")},
			want: []Wave{{0, false, nodes}},
		},
		"canary larger than fleet": {
			spec: Spec{Nodes: nodes[:2], Canary: 5, MaxUnavailable: intstr.FromInt32(1)},
			want: []Wave{{0, true, []string{"n1", "n2"}}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Waves(&tc.spec)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestNextPhase(t *testing.T) {
	tests := map[string]struct {
		rec       Phase
		cordoned  bool
		prev      *corev1.NodeConfigSource
		o         Observed
		want      Phase
		wantError string
	}{
		"waiting, untouched":                                      {rec: Waiting, o: Observed{Ready: true, Schedulable: true}, want: Waiting},
		"waiting, already runs target":                            {rec: Waiting, o: Observed{Assigned: true, Running: true, Ready: true}, want: Skipped},
		"waiting, assigned by someone":                            {rec: Waiting, o: Observed{Assigned: true}, want: InProgress},
		"waiting, assigned and failed":                            {rec: Waiting, o: Observed{Assigned: true, Error: "boom"}, want: Failed, wantError: "boom"},
		"in progress and cordoned, active and ready: to uncordon": {rec: InProgress, cordoned: true, o: Observed{Assigned: true, Running: true, Ready: true}, want: InProgress},
		"in progress and cordoned, rolled back":                   {rec: InProgress, cordoned: true, o: Observed{Assigned: true, Error: "rolled back", Ready: true}, want: Failed, wantError: "rolled back"},
		"in progress, not yet":                                    {rec: InProgress, o: Observed{Assigned: true, Ready: true}, want: InProgress},
		"in progress, active not ready":                           {rec: InProgress, o: Observed{Assigned: true, Running: true}, want: InProgress},
		"in progress, active and ready":                           {rec: InProgress, o: Observed{Assigned: true, Running: true, Ready: true}, want: Succeeded},
		"in progress, rolled back":                                {rec: InProgress, o: Observed{Assigned: true, Error: "rolled back"}, want: Failed, wantError: "rolled back"},
		"in progress, not assigned yet":                           {rec: InProgress, o: Observed{}, want: InProgress},
		"in progress, still on its previous assignment":           {rec: InProgress, prev: cm("old"), o: Observed{Holds: cm("old")}, want: InProgress},
		"in progress, assigned another config by hand": {rec: InProgress, prev: cm("old"), o: Observed{Holds: cm("other"), Ready: true},
			want: Failed, wantError: "assignment changed outside the rollout to kube-system/other while the rollout applied its config (before the rollout: kube-system/old); halted so as not to overwrite it"},
		"in progress, reset by hand": {rec: InProgress, prev: cm("old"), o: Observed{}, want: Failed,
			wantError: "assignment changed outside the rollout to <local> while the rollout applied its config (before the rollout: kube-system/old); halted so as not to overwrite it"},
		"done stays done after drift": {rec: Succeeded, o: Observed{}, want: Succeeded},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, msg := NextPhase(NodeStatus{Phase: tc.rec, Cordoned: tc.cordoned, Previous: tc.prev}, tc.o)
			if got != tc.want || msg != tc.wantError {
				t.Errorf("got (%s, %q), want (%s, %q)", got, msg, tc.want, tc.wantError)
			}
		})
	}
}

func TestDrainChanges(t *testing.T) {
	static := &kubeletconfigv1beta1.KubeletConfiguration{CPUManagerPolicy: "static", MaxPods: 10}
	none := &kubeletconfigv1beta1.KubeletConfiguration{CPUManagerPolicy: "none", MaxPods: 20}
	if got := FormatChanges(DrainChanges(none, static)); got != `cpuManagerPolicy "none" -> "static"` {
		t.Errorf("none -> static: got %q", got)
	}
	if got := DrainChanges(nil, none); len(got) != 0 {
		t.Errorf("default -> none: got %v, want no change (maxPods never drains)", got)
	}
	if !SetsDrainField(static) || SetsDrainField(none) {
		t.Error("SetsDrainField: want true for static, false for none")
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// fakeAgents plays every node's dkc agent against a fake clientset: when a
// node's assignment differs from what it reports active, it "restarts" for
// restart, then reports the assignment active, or an error when bad says
// so, and then looks at the node again. It records how many nodes were
// restarting at once, and every node's applies.
type fakeAgents struct {
	client  kubernetes.Interface
	restart time.Duration
	// slow holds the nodes that restart for longer than restart.
	slow map[string]time.Duration
	bad  func(src *corev1.NodeConfigSource) bool

	mu       sync.Mutex
	busy     map[string]bool
	peak     int
	applies  map[string]int
	order    []string
	finished []string
	overlaps int
}

// newAgents returns fake agents on client's nodes whose restarts take
// restart; run starts them.
func newAgents(client kubernetes.Interface, restart time.Duration) *fakeAgents {
	return &fakeAgents{client: client, restart: restart, busy: map[string]bool{}, applies: map[string]int{}}
}

func (a *fakeAgents) run(ctx context.Context, t *testing.T) {
	w, err := a.client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Error(err)
		return
	}
	go func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				if ev.Type == watch.Deleted {
					continue
				}
				a.handle(ctx, ev.Object.(*corev1.Node))
			}
		}
	}()
}

func (a *fakeAgents) handle(ctx context.Context, node *corev1.Node) {
	want, _, _ := source.Assigned(node)
	st, _, _ := source.Status(node)
	if st != nil && source.Equal(st.Assigned, want) {
		return
	}
	if st == nil && want == nil {
		return
	}
	a.mu.Lock()
	if a.busy[node.Name] {
		a.mu.Unlock()
		return
	}
	a.busy[node.Name] = true
	if n := len(a.busy); n > a.peak {
		a.peak = n
	}
	a.applies[node.Name]++
	a.order = append(a.order, node.Name)
	a.mu.Unlock()
	restart := a.restart
	if d, ok := a.slow[node.Name]; ok {
		restart = d
	}
	go func() {
		time.Sleep(restart)
		next := &corev1.NodeConfigStatus{Assigned: want, Active: want}
		if a.bad != nil && a.bad(want) {
			next = &corev1.NodeConfigStatus{Assigned: want, Error: status.ValidateError}
			if st != nil {
				next.Active = st.Active
			}
		}
		// The restart is over before the agent reports it: once the
		// report is written, a driver may start the next node before
		// this goroutine runs again.
		a.mu.Lock()
		delete(a.busy, node.Name)
		a.finished = append(a.finished, node.Name)
		a.mu.Unlock()
		patch, _ := source.StatusPatch(source.Annotation, next, nil)
		_, _ = a.client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		// Events that came while busy were dropped: look at the node as
		// it is now, as a level-driven agent does.
		if now, err := a.client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{}); err == nil {
			a.handle(ctx, now)
		}
	}()
}

// checkBudgetAndOnce checks that never more than budget nodes restarted at
// once, and that each of names restarted exactly once.
func (a *fakeAgents) checkBudgetAndOnce(t *testing.T, names []string, budget int) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.peak > budget {
		t.Errorf("peak %d nodes restarting at once, budget %d", a.peak, budget)
	}
	for _, n := range names {
		if a.applies[n] != 1 {
			t.Errorf("node %s applied %d times, want 1", n, a.applies[n])
		}
	}
}

func newFleet(t *testing.T, n int) (*fake.Clientset, []string) {
	t.Helper()
	client := fake.NewClientset()
	// The fake clientset ignores dry-run: answer the carrier probe (a
	// server-side dry-run) as an apiserver 1.26+ does, with the field
	// dropped and nothing stored.
	client.PrependReactor("patch", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
		p := action.(k8stesting.PatchActionImpl)
		if len(p.PatchOptions.DryRun) == 0 {
			return false, nil, nil
		}
		node, err := client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("nodes"), "", p.Name)
		return true, node, err
	})
	versionNodes(client)
	var names []string
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("n%d", i)
		names = append(names, name)
		if _, err := client.CoreV1().Nodes().Create(context.Background(), readyNode(name, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return client, names
}

// versionNodes makes client keep the Nodes' resourceVersions as an
// apiserver does (versionObjects). The driver's caches of what it
// observed and decoded of a node hold only versioned Nodes.
func versionNodes(client *fake.Clientset) { versionObjects(client, nodeResource) }

// versionObjects makes f keep the resourceVersions of its objects of gvr
// as an apiserver does: each version of an object gets one of its own, and
// an update, or a patch that names one (a precondition), is refused with a
// conflict unless it names the stored one.
func versionObjects(f interface {
	PrependReactor(verb, resource string, reaction k8stesting.ReactionFunc)
	Tracker() k8stesting.ObjectTracker
}, gvr schema.GroupVersionResource) {
	f.PrependReactor("create", gvr.Resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		a.(k8stesting.CreateAction).GetObject().(metav1.Object).SetResourceVersion(nextVersion())
		return false, nil, nil
	})
	f.PrependReactor("update", gvr.Resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.UpdateAction).GetObject().(metav1.Object)
		rv, err := storedVersion(f.Tracker(), gvr, a.GetNamespace(), obj.GetName())
		if err != nil {
			return true, nil, err
		}
		if obj.GetResourceVersion() != "" && obj.GetResourceVersion() != rv {
			return true, nil, versionConflict(gvr, obj.GetName())
		}
		obj.SetResourceVersion(nextVersion())
		return false, nil, nil
	})
	f.PrependReactor("patch", gvr.Resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		return patchVersioned(f.Tracker(), gvr, a.(k8stesting.PatchActionImpl))
	})
}

var (
	nodeResource = corev1.SchemeGroupVersion.WithResource("nodes")
	lastVersion  atomic.Int64
)

// nextVersion is a resourceVersion that no object of the tests has had.
func nextVersion() string { return strconv.FormatInt(lastVersion.Add(1), 10) }

func storedVersion(tracker k8stesting.ObjectTracker, gvr schema.GroupVersionResource, ns, name string) (string, error) {
	obj, err := tracker.Get(gvr, ns, name)
	if err != nil {
		return "", err
	}
	return obj.(metav1.Object).GetResourceVersion(), nil
}

func versionConflict(gvr schema.GroupVersionResource, name string) error {
	return apierrors.NewConflict(gvr.GroupResource(), name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
}

// patchVersioned applies a JSON merge or strategic merge patch p as an
// apiserver does: a resourceVersion in it is a precondition, and the
// patched object gets a version of its own. A dry run, or another kind of
// patch, is left to the reactors after it.
func patchVersioned(tracker k8stesting.ObjectTracker, gvr schema.GroupVersionResource, p k8stesting.PatchActionImpl) (bool, runtime.Object, error) {
	if len(p.PatchOptions.DryRun) > 0 || (p.GetPatchType() != types.MergePatchType && p.GetPatchType() != types.StrategicMergePatchType) {
		return false, nil, nil
	}
	rv, err := storedVersion(tracker, gvr, p.GetNamespace(), p.GetName())
	if err != nil {
		return true, nil, err
	}
	var patch map[string]any
	if err := json.Unmarshal(p.GetPatch(), &patch); err != nil {
		return true, nil, err
	}
	meta, _ := patch["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		patch["metadata"] = meta
	}
	if want, ok := meta["resourceVersion"].(string); ok && want != rv {
		return true, nil, versionConflict(gvr, p.GetName())
	}
	meta["resourceVersion"] = nextVersion()
	if p.Patch, err = json.Marshal(patch); err != nil {
		return true, nil, err
	}
	return k8stesting.ObjectReaction(tracker)(p)
}

// newStore returns a rollout store on a fake dynamic client, which gives
// each rollout created the UID "uid-" and its name, as an apiserver gives
// each object one: a node's mark names its rollout by UID. As an
// apiserver, it gives each version of a rollout a resourceVersion of its
// own, and refuses with a conflict an update or a patch that names
// another than the stored one.
func newStore() *Store {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{Resource: Kind + "List"})
	versionObjects(dyn, Resource)
	dyn.PrependReactor("create", Resource.Resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.CreateAction).GetObject().(*unstructured.Unstructured)
		u.SetUID(types.UID("uid-" + u.GetName()))
		return false, nil, nil
	})
	return &Store{Client: dyn, Namespace: source.DefaultNamespace}
}

// createRollout stores r as a client that created it and a driver that
// then recorded its status would.
func createRollout(t *testing.T, store *Store, r *Rollout) {
	t.Helper()
	created, err := store.Create(context.Background(), r, false)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status.State == "" {
		return
	}
	created.Status = r.Status
	if _, err := store.UpdateStatus(context.Background(), created); err != nil {
		t.Fatal(err)
	}
}

// withMark returns node with mark m (nil: none).
func withMark(t *testing.T, node *corev1.Node, m *Mark) *corev1.Node {
	t.Helper()
	patch, err := markPatch(nil, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := source.PatchedNode(node, patch)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runningOn returns node assigned src, which its agent reports active.
func runningOn(t *testing.T, node *corev1.Node, src *corev1.NodeConfigSource) *corev1.Node {
	t.Helper()
	out, err := source.PatchedNode(node, mustAssignPatch(t, src))
	if err != nil {
		t.Fatal(err)
	}
	st, err := source.StatusPatch(source.Annotation, &corev1.NodeConfigStatus{Assigned: src, Active: src}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out, err = source.PatchedNode(out, st); err != nil {
		t.Fatal(err)
	}
	return out
}

// assign assigns the node named name src, as an operator does by hand.
func assign(ctx context.Context, t *testing.T, client kubernetes.Interface, name string, src *corev1.NodeConfigSource) {
	t.Helper()
	if _, err := client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, mustAssignPatch(t, src), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// mark writes m on the node named name, as a driver that started it did.
func mark(ctx context.Context, t *testing.T, client kubernetes.Interface, name string, m *Mark) {
	t.Helper()
	patch, err := markPatch(nil, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// markOn reads the mark of the node named name.
func markOn(ctx context.Context, t *testing.T, client kubernetes.Interface, name string) *Mark {
	t.Helper()
	m, err := MarkOf(nodeOn(ctx, t, client, name))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// nodeOn returns the node named name as client stores it.
func nodeOn(ctx context.Context, t *testing.T, client kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return node
}

// storedStatus returns the status of rollout name as stored, as JSON.
func storedStatus(ctx context.Context, t *testing.T, store *Store, name string) map[string]any {
	t.Helper()
	u, err := store.Client.Resource(Resource).Namespace(store.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, _, err := unstructured.NestedMap(u.Object, "status")
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// startRollout creates rollout r1 over spec and returns its store; the
// client is the fleet's, which the store does not need.
func startRollout(t *testing.T, _ kubernetes.Interface, spec Spec) *Store {
	t.Helper()
	store := newStore()
	createRollout(t, store, New(source.DefaultNamespace, "r1", spec))
	return store
}

func TestRunRollsOutUnderBudget(t *testing.T) {
	client, names := newFleet(t, 7)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	agents := newAgents(client, 30*time.Millisecond)
	agents.run(ctx, t)
	store := startRollout(t, client, Spec{Config: cm("good"), Nodes: names, Canary: 1, MaxUnavailable: intstr.FromInt32(2)})

	var waves []int
	r, err := Run(ctx, client, store, "r1", Options{
		Resync: 50 * time.Millisecond,
		OnChange: func(r *Rollout, _ map[string]Observed) {
			waves = append(waves, r.Status.Wave)
		},
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.Status.State != Done {
		t.Errorf("state %s, want Done", r.Status.State)
	}
	for _, n := range names {
		if got := r.NodeStatus(n); got.Phase != Succeeded || got.Previous != nil || !got.Marked {
			t.Errorf("node %s: %+v, want Done, marked, with previous <local>", n, got)
		}
		if m := markOn(ctx, t, client, n); m == nil || m.UID != r.UID || m.Rollout != "kube-system/r1" || m.Previous != nil || m.Cordoned {
			t.Errorf("node %s marked %+v, want r1's mark, with previous <local>, not cordoned", n, m)
		}
	}
	st := storedStatus(ctx, t, store, "r1")
	if _, ok := st["nodes"]; ok {
		t.Errorf("the stored status lists the nodes: %v", st["nodes"])
	}
	if diff := cmp.Diff(map[string]any{"waiting": int64(0), "inProgress": int64(0), "updated": int64(7), "skipped": int64(0), "failed": int64(0)}, st["counts"]); diff != "" {
		t.Errorf("stored counts (-want +got):\n%s", diff)
	}
	agents.checkBudgetAndOnce(t, names, 2)
	agents.mu.Lock()
	defer agents.mu.Unlock()
	if agents.order[0] != "n1" {
		t.Errorf("first node %s, want the canary n1", agents.order[0])
	}
}

// TestRunSlidesTheBudgetWithoutASoak: with no soak and a budget of 2, the
// nodes after the canary do not wait for a slow node: each slot it does not
// hold goes to the next node as soon as it is free, so the slow node
// finishes last.
func TestRunSlidesTheBudgetWithoutASoak(t *testing.T) {
	client, names := newFleet(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	agents := newAgents(client, 20*time.Millisecond)
	agents.slow = map[string]time.Duration{"n2": time.Second}
	agents.run(ctx, t)
	store := startRollout(t, client, Spec{Config: cm("good"), Nodes: names, Canary: 1, MaxUnavailable: intstr.FromInt32(2)})
	if _, err := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	agents.mu.Lock()
	defer agents.mu.Unlock()
	if diff := cmp.Diff([]string{"n1", "n3", "n4", "n5", "n2"}, agents.finished); diff != "" {
		t.Errorf("nodes in the order they finished (-want +got):\n%s", diff)
	}
	if agents.peak > 2 {
		t.Errorf("peak %d nodes restarting at once, budget 2", agents.peak)
	}
}

func TestRunHaltsOnCanaryError(t *testing.T) {
	client, names := newFleet(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	agents := newAgents(client, 10*time.Millisecond)
	agents.bad = func(src *corev1.NodeConfigSource) bool { return src != nil && src.ConfigMap.Name == "bad" }
	agents.run(ctx, t)
	store := startRollout(t, client, Spec{Config: cm("bad"), Nodes: names, Canary: 1, MaxUnavailable: intstr.FromInt32(3)})

	r, err := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond})
	if !errors.Is(err, ErrHalted) || status.ExitCode(err) != status.ExitConfigError {
		t.Fatalf("Run: %v, want halted with exit code 2", err)
	}
	want := "node/n1: " + status.ValidateError
	if r.Status.State != Halted || r.Status.Reason != want {
		t.Errorf("state %s %q, want Halted %q", r.Status.State, r.Status.Reason, want)
	}
	time.Sleep(100 * time.Millisecond)
	for _, n := range names[1:] {
		node, _ := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if src, _, _ := source.Assigned(node); src != nil {
			t.Errorf("node %s assigned %v after the canary failed", n, src)
		}
	}
}

func TestRunResumesWhatADeadClientRecorded(t *testing.T) {
	client, names := newFleet(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	agents := newAgents(client, 10*time.Millisecond)
	agents.run(ctx, t)
	// A driver marked n1 and n2 and died: n1 was assigned, n2 was not.
	r := New(source.DefaultNamespace, "r1", Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(2)})
	r.Status.State = Running
	store := newStore()
	createRollout(t, store, r)
	mark(ctx, t, client, "n1", markOf(nil, false))
	mark(ctx, t, client, "n2", markOf(nil, false))
	assign(ctx, t, client, "n1", cm("good"))
	got, err := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond})
	if err != nil || got.Status.State != Done {
		t.Fatalf("Run: %v, state %s", err, got.Status.State)
	}
	agents.mu.Lock()
	defer agents.mu.Unlock()
	if diff := cmp.Diff(map[string]int{"n1": 1, "n2": 1, "n3": 1}, agents.applies); diff != "" {
		t.Errorf("applies (-want +got):\n%s", diff)
	}
}

func TestRunStopsWhenPaused(t *testing.T) {
	client, names := newFleet(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := New(source.DefaultNamespace, "r1", Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(1)})
	r.Spec.Paused = true
	store := newStore()
	createRollout(t, store, r)
	_, err := Run(ctx, client, store, "r1", Options{})
	if !errors.Is(err, ErrPaused) {
		t.Fatalf("Run: %v, want ErrPaused", err)
	}
	for _, n := range names {
		node, _ := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if src, _, _ := source.Assigned(node); src != nil {
			t.Errorf("paused rollout assigned node %s", n)
		}
	}
}

// fakeDrainer records its calls, with what the node showed then: whether
// it was cordoned, and whether its mark said so. A drain of a node in fail
// fails.
type fakeDrainer struct {
	client kubernetes.Interface
	fail   string

	mu    sync.Mutex
	calls []string
}

func (d *fakeDrainer) Drain(ctx context.Context, name string, blocked func(Blocked)) error {
	call := "drain " + name
	if node, err := d.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
		call += ": " + err.Error()
	} else {
		if node.Spec.Unschedulable {
			call += ", cordoned"
		}
		if m, _ := MarkOf(node); m != nil && m.Cordoned {
			call += ", marked cordoned"
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, call)
	if name == d.fail {
		return errors.New("drain failed")
	}
	return nil
}

var _ Drainer = &fakeDrainer{}

func TestRunDrainsOnlyListedNodes(t *testing.T) {
	client, names := newFleet(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	agents := newAgents(client, 10*time.Millisecond)
	agents.run(ctx, t)
	store := startRollout(t, client, Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(1), Drain: []string{"n2"}})
	d := &fakeDrainer{client: client}
	if _, err := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond, Drainer: d}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"drain n2, cordoned, marked cordoned"}, d.calls); diff != "" {
		t.Errorf("drainer calls (-want +got):\n%s", diff)
	}
	for _, n := range names {
		node, err := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m, err := MarkOf(node)
		if err != nil {
			t.Fatal(err)
		}
		if node.Spec.Unschedulable || m == nil || m.Cordoned {
			t.Errorf("node %s: unschedulable %v, mark %+v; want it uncordoned, its mark saying so", n, node.Spec.Unschedulable, m)
		}
	}
}

// TestRunUncordonsANodeWhoseDrainFailed: a node whose drain fails is
// uncordoned again, its mark still asking for the drain, and halts the
// rollout with the drain's error; it is assigned nothing. A driver that
// picks the rollout up where the halt was never written (killed before
// it, or its write lost) drains the node before it assigns it.
func TestRunUncordonsANodeWhoseDrainFailed(t *testing.T) {
	client, names := newFleet(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store := startRollout(t, client, Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(1), Drain: []string{"n1"}})
	d := &fakeDrainer{client: client, fail: "n1"}
	r, err := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond, Drainer: d})
	if !errors.Is(err, ErrHalted) {
		t.Fatalf("Run: %v, want halted", err)
	}
	if want := "node/n1: drain failed"; r.Status.Reason != want {
		t.Errorf("reason %q, want %q", r.Status.Reason, want)
	}
	node, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := MarkOf(node)
	if node.Spec.Unschedulable || m == nil || !m.Cordoned || !m.Owns(r) {
		t.Errorf("n1: unschedulable %v, mark %+v; want it uncordoned, marked by r1 as still to drain", node.Spec.Unschedulable, m)
	}
	if src, _, _ := source.Assigned(node); src != nil {
		t.Errorf("n1 assigned %s after its drain failed", DescribeTarget(src))
	}

	// The halt never reached the cluster: the next driver finds r1
	// Running with n1 marked and not assigned.
	r.Status.State, r.Status.Reason, r.Status.Failures = Running, "", nil
	if _, err := store.UpdateStatus(ctx, r); err != nil {
		t.Fatal(err)
	}
	agents := newAgents(client, 10*time.Millisecond)
	agents.run(ctx, t)
	again := &fakeDrainer{client: client}
	if _, err := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond, Drainer: again}); err != nil {
		t.Fatalf("the next driver: %v", err)
	}
	if len(again.calls) == 0 || !strings.HasPrefix(again.calls[0], "drain n1") {
		t.Errorf("the next driver's drainer calls %q: want n1 drained before it is assigned", again.calls)
	}
}

// TestRunHaltsAfterWritingTheRollout: a pass that writes the rollout (its
// counts changed) and then fails to start a node halts the rollout on that
// failure, over the version it just wrote, at once: the node is not drained
// again.
func TestRunHaltsAfterWritingTheRollout(t *testing.T) {
	client, names := newFleet(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	agents := newAgents(client, 10*time.Millisecond)
	agents.run(ctx, t)
	store := startRollout(t, client, Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(1), Drain: []string{"n2"}})
	d := &fakeDrainer{client: client, fail: "n2"}
	// n1 done changes the counts, and the pass that starts n2 writes
	// them first.
	r, err := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond, Drainer: d, StatusInterval: time.Nanosecond})
	if !errors.Is(err, ErrHalted) {
		t.Fatalf("Run: %v, want halted", err)
	}
	if want := "node/n2: drain failed"; r.Status.Reason != want {
		t.Errorf("reason %q, want %q", r.Status.Reason, want)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.calls) != 1 {
		t.Errorf("drainer calls %q: want n2 drained once, then the rollout halted", d.calls)
	}
}

// TestRunKeepsACordonItDidNotMake: a node someone cordoned before the
// rollout drains it stays cordoned, once it passed its health gate, or
// after its drain failed; the node the rollout cordoned itself is
// uncordoned. A cordon an earlier rollout made and left (it halted with the
// node drained; its mark says whose cordon that is) is not one the node had
// before: the next rollout to drain it, such as the undo, uncordons it,
// while a node someone cordoned before that earlier rollout stays cordoned.
// (Cordoned nodes count against the budget until they are back: the budget
// leaves room for every node.)
func TestRunKeepsACordonItDidNotMake(t *testing.T) {
	started := metav1.NewMicroTime(t0)
	earlier := func(keep bool) *Mark {
		return &Mark{Rollout: "kube-system/r0", UID: "uid-r0", Cordoned: true, KeepCordoned: keep, Started: started}
	}
	for name, tc := range map[string]struct {
		nodes int
		// cordoned are the nodes cordoned before the rollout, each with
		// the mark of the rollout that left it so (nil: none did).
		cordoned     map[string]*Mark
		fail         string
		wantState    State
		wantCordoned map[string]bool
	}{
		"passed": {nodes: 2, cordoned: map[string]*Mark{"n1": nil}, wantState: Done,
			wantCordoned: map[string]bool{"n1": true, "n2": false}},
		"drain failed": {nodes: 2, cordoned: map[string]*Mark{"n1": nil}, fail: "n1", wantState: Halted,
			wantCordoned: map[string]bool{"n1": true, "n2": false}},
		"a cordon an earlier rollout left": {nodes: 3, cordoned: map[string]*Mark{"n1": earlier(false), "n2": earlier(true)}, wantState: Done,
			wantCordoned: map[string]bool{"n1": false, "n2": true, "n3": false}},
	} {
		t.Run(name, func(t *testing.T) {
			client, names := newFleet(t, tc.nodes)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for node, mark := range tc.cordoned {
				n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if mark != nil {
					n = withMark(t, n, mark)
				}
				n.Spec.Unschedulable = true
				if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			agents := newAgents(client, 10*time.Millisecond)
			agents.run(ctx, t)
			store := startRollout(t, client, Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(int32(tc.nodes)), Drain: names})
			r, _ := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond, Drainer: &fakeDrainer{client: client, fail: tc.fail}, Parallel: 1})
			if r.Status.State != tc.wantState {
				t.Fatalf("rollout %s (%s), want %s", r.Status.State, r.Status.Reason, tc.wantState)
			}
			for node, want := range tc.wantCordoned {
				if got := nodeOn(ctx, t, client, node).Spec.Unschedulable; got != want {
					t.Errorf("%s unschedulable %v, want %v", node, got, want)
				}
			}
		})
	}
}

// TestRunSaysWhyTheBudgetHoldsIt: a node the rollout did not start, cordoned,
// fills a budget of one; the stored rollout says so (BudgetHeld) rather than
// wait without a word, and goes on by itself once the node is uncordoned,
// the reason cleared.
func TestRunSaysWhyTheBudgetHoldsIt(t *testing.T) {
	client, names := newFleet(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	setUnschedulable := func(v bool) {
		t.Helper()
		n := nodeOn(ctx, t, client, "n2")
		n.Spec.Unschedulable = v
		if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setUnschedulable(true)
	agents := newAgents(client, 10*time.Millisecond)
	agents.run(ctx, t)
	store := startRollout(t, client, Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(1)})
	done := make(chan *Rollout, 1)
	go func() {
		r, _ := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond})
		done <- r
	}()
	const want = "BudgetHeld: no node starts while node/n2 (cordoned) is unavailable, which the budget of 1 counts: uncordon it or make it Ready, or start the rollout again with a larger budget"
	var stored *Rollout
	for stored == nil || stored.Status.Reason != want {
		select {
		case r := <-done:
			t.Fatalf("Run returned %s (%q) while n2 held the budget", r.Status.State, r.Status.Reason)
		case <-ctx.Done():
			t.Fatalf("the stored rollout's reason is %q, want %q", stored.Status.Reason, want)
		case <-time.After(20 * time.Millisecond):
		}
		var err error
		if stored, err = store.Get(ctx, "r1"); err != nil {
			t.Fatal(err)
		}
	}
	agents.mu.Lock()
	applied := len(agents.order)
	agents.mu.Unlock()
	if applied != 0 {
		t.Fatalf("%d nodes applied while the budget was full", applied)
	}
	setUnschedulable(false)
	r := <-done
	if r.Status.State != Done || r.Status.Reason != "" {
		t.Fatalf("rollout %s (%q), want Done, no reason", r.Status.State, r.Status.Reason)
	}
}

// TestRunCountsNotReadyNodesAgainstTheBudget: with --max-unavailable 2 and
// one node NotReady, only one node restarts at a time, as in MCO.
func TestRunCountsNotReadyNodesAgainstTheBudget(t *testing.T) {
	client, names := newFleet(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	n3, _ := client.CoreV1().Nodes().Get(ctx, "n3", metav1.GetOptions{})
	n3.Status.Conditions[0].Status = corev1.ConditionFalse
	if _, err := client.CoreV1().Nodes().Update(ctx, n3, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	agents := newAgents(client, 50*time.Millisecond)
	agents.run(ctx, t)
	store := startRollout(t, client, Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(2)})
	r, err := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run: %v, want the deadline (n3 never gets Ready)", err)
	}
	agents.mu.Lock()
	defer agents.mu.Unlock()
	if agents.peak != 1 {
		t.Errorf("peak %d nodes restarting at once, want 1: n3 NotReady holds the other slot", agents.peak)
	}
	// Run returns the rollout as last read: its nodes' phases are on them.
	if r, err = LiveStatus(context.Background(), client, r); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n1", "n2"} {
		if p := r.NodeStatus(n).Phase; p != Succeeded {
			t.Errorf("node %s %s, want Done", n, p)
		}
	}
	if p := r.NodeStatus("n3").Phase; p != InProgress {
		t.Errorf("node n3 %s, want InProgress (runs the config, not Ready)", p)
	}
}

// TestFactsReader: what the nodes run comes from the ConfigMaps they
// report active; a node on its local config whose /configz cannot be read
// is left out, with a warning.
func TestFactsReader(t *testing.T) {
	partial := func(extra string) string {
		return "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\n" + extra
	}
	client := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "static", Namespace: "kube-system"}, Data: map[string]string{"kubelet": partial("cpuManagerPolicy: static\n")}},
	)
	onStatic := readyNode("n1", nil)
	onStatic.Annotations = map[string]string{source.StatusAnnotation: `{"active":{"configMap":{"namespace":"kube-system","name":"static","kubeletConfigKey":"kubelet"}}}`}
	local := readyNode("n2", nil)
	var warnings []string
	p := &FactsReader{Client: client, Kubelets: true, Warn: func(f string, a ...any) { warnings = append(warnings, fmt.Sprintf(f, a...)) }}

	// maxPods sets no drain field: no kubelet is asked.
	facts, err := p.Read(context.Background(), []corev1.Node{*onStatic, *local}, []byte(partial("maxPods: 20\n")), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := facts.Configs[ConfigKey(cm("static"))]; got == nil || got.CPUManagerPolicy != "static" {
		t.Errorf("config of static: %+v", got)
	}
	if len(facts.Live) != 0 || len(warnings) != 0 {
		t.Errorf("live %v, warnings %q; want no kubelet asked", facts.Live, warnings)
	}
	// To static: n2's local config is asked for; the fake has no REST
	// client, so it is warned about and left out.
	if _, err := p.Read(context.Background(), []corev1.Node{*onStatic, *local}, []byte(partial("cpuManagerPolicy: static\n")), nil); err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "node/n2") {
		t.Errorf("warnings %q, want one about n2", warnings)
	}
}

func TestStoreRoundTrip(t *testing.T) {
	store := newStore()
	ctx := context.Background()
	now := metav1.NewMicroTime(time.Date(2026, 11, 23, 5, 0, 0, 123000, time.UTC))
	in := New("kube-system", "r1", Spec{
		Config: cm("a"), Targets: map[string]*corev1.NodeConfigSource{"n2": nil}, Nodes: []string{"n1", "n2"},
		MaxUnavailable: intstr.FromString("10%"), Canary: 1, Soak: metav1.Duration{Duration: time.Minute},
		Windows: Windows{{Days: []string{"Mon", "Fri"}, Start: "22:00", Duration: metav1.Duration{Duration: 4 * time.Hour}, TimeZone: "Europe/Berlin"}},
	})
	in.Status = Status{State: Halted, Reason: "node/n1: rolled back", Wave: 1, SoakSince: &metav1.Time{Time: now.Time.Truncate(time.Second)},
		Counts:   Counts{Waiting: 1, Failed: 1},
		Failures: []Failure{{Node: "n1", Error: "rolled back"}},
		Nodes:    map[string]NodeStatus{"n1": {Phase: Failed, Previous: cm("old"), Started: &now}},
	}
	createRollout(t, store, in)
	got, err := store.Get(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != "NodeConfigRollout" || got.APIVersion != "kubectl-dkc.io/v1alpha1" {
		t.Errorf("stored as %s %s, want NodeConfigRollout kubectl-dkc.io/v1alpha1", got.APIVersion, got.Kind)
	}
	if diff := cmp.Diff(in.Spec, got.Spec); diff != "" {
		t.Errorf("spec (-created +read):\n%s", diff)
	}
	want := in.Status
	want.Nodes = nil // derived from the nodes, never stored
	if diff := cmp.Diff(want, got.Status, cmpopts.IgnoreFields(Status{}, "LastUpdate")); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	if got.UID == "" {
		t.Error("the rollout has no UID: no node's mark could name it")
	}
	if tgt, ok := got.Spec.Targets["n2"]; !ok || tgt != nil {
		t.Errorf("target of n2 %v (present %v), want an explicit local config", tgt, ok)
	}
	if _, err := store.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of a missing rollout: %v, want ErrNotFound", err)
	}
}

// TestStoreRequest: pause, resume and abort go through the spec, and only
// from the states that allow them, whatever the driver last wrote.
func TestStoreRequest(t *testing.T) {
	for name, tc := range map[string]struct {
		status  State
		spec    func(*Spec)
		to      State
		from    []State
		want    State
		wantErr string
	}{
		"a rollout no driver looked at yet pauses": {
			to: Paused, from: []State{Running}, want: Paused,
		},
		"a paused rollout resumes": {
			status: Paused, spec: func(s *Spec) { s.Paused = true }, to: Running, from: []State{Paused}, want: Running,
		},
		"a pause no driver took yet can be undone": {
			status: Running, spec: func(s *Spec) { s.Paused = true }, to: Running, from: []State{Paused}, want: Running,
		},
		"a halted rollout aborts": {
			status: Halted, to: Aborted, from: []State{Running, Paused, Halted}, want: Aborted,
		},
		"a halted rollout does not resume": {
			status: Halted, to: Running, from: []State{Paused},
			wantErr: `rollout "r1" is Halted: it can be made Running only from Paused`,
		},
		"an aborted rollout does not pause": {
			spec: func(s *Spec) { s.Aborted = true }, to: Paused, from: []State{Running},
			wantErr: `rollout "r1" is Aborted: it can be made Paused only from Running`,
		},
		"a done rollout does not abort": {
			status: Done, to: Aborted, from: []State{Running, Paused, Halted},
			wantErr: `rollout "r1" is Done: it can be made Aborted only from Running or Paused or Halted`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			store := newStore()
			r := New(source.DefaultNamespace, "r1", Spec{Config: cm("a"), Nodes: []string{"n1"}})
			if tc.spec != nil {
				tc.spec(&r.Spec)
			}
			r.Status.State = tc.status
			createRollout(t, store, r)
			got, err := store.Request(context.Background(), "r1", tc.to, tc.from...)
			if errString(err) != tc.wantErr {
				t.Fatalf("Request: %v, want %q", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if got.State() != tc.want {
				t.Errorf("state %s, want %s", got.State(), tc.want)
			}
			if got.Status.State != tc.status {
				t.Errorf("status.state %q changed to %q: only the driver writes it", tc.status, got.Status.State)
			}
		})
	}
}

// The watch often delivers a client's own write before the write's
// response: that is no reason to read the rollout again on the next pass.
// Another client's version is, and so is a deleted rollout.
func TestEngineTellsItsOwnWritesFromOthers(t *testing.T) {
	written := func(rv string) *Rollout {
		r := &Rollout{}
		r.ResourceVersion = rv
		return r
	}
	tests := map[string]struct {
		steps     func(e *engine)
		wantStale bool
	}{
		"own write delivered after its response":  {func(e *engine) { e.wrote(written("2")); e.delivered("2", false) }, false},
		"own write delivered before its response": {func(e *engine) { e.delivered("2", false); e.wrote(written("2")) }, false},
		"another client's write after ours":       {func(e *engine) { e.wrote(written("2")); e.delivered("3", false) }, true},
		"own write, then the informer's lag":      {func(e *engine) { e.delivered("0", false); e.wrote(written("2")) }, true},
		"deleted":                                 {func(e *engine) { e.wrote(written("2")); e.delivered("", true) }, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := &engine{rv: "1"}
			tc.steps(e)
			if e.stale != tc.wantStale {
				t.Errorf("stale = %v, want %v", e.stale, tc.wantStale)
			}
		})
	}
}
