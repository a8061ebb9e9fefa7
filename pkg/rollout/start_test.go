package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// patchCounter wraps the rollout's clientset. It counts the carrier
// probes (dry-run Node patches) and the assignment patches in flight at
// once, and makes each assignment take delay. The delay is spent outside
// the fake clientset, which serves one request at a time. An assignment
// of node fail fails at once. assigning, when set, is called as each
// assignment is sent.
type patchCounter struct {
	kubernetes.Interface
	delay     time.Duration
	fail      string
	assigning func(node string)

	mu       sync.Mutex
	probes   int
	inFlight int
	peak     int
	tried    []string
}

// IsWatchListSemanticsUnSupported tells the informers, as the fake
// clientset does, that it cannot stream a watch's initial list.
func (c *patchCounter) IsWatchListSemanticsUnSupported() bool { return true }

func (c *patchCounter) CoreV1() corev1client.CoreV1Interface {
	return countingCore{c.Interface.CoreV1(), c}
}

type countingCore struct {
	corev1client.CoreV1Interface
	c *patchCounter
}

func (s countingCore) Nodes() corev1client.NodeInterface {
	return countingNodes{s.CoreV1Interface.Nodes(), s.c}
}

type countingNodes struct {
	corev1client.NodeInterface
	c *patchCounter
}

func (n countingNodes) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*corev1.Node, error) {
	c := n.c
	if len(opts.DryRun) > 0 {
		c.mu.Lock()
		c.probes++
		c.mu.Unlock()
		return n.NodeInterface.Patch(ctx, name, pt, data, opts, sub...)
	}
	if c.assigning != nil {
		c.assigning(name)
	}
	c.mu.Lock()
	c.tried = append(c.tried, name)
	if name == c.fail {
		c.mu.Unlock()
		return nil, errors.New("boom")
	}
	c.inFlight++
	c.peak = max(c.peak, c.inFlight)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.inFlight--
		c.mu.Unlock()
	}()
	time.Sleep(c.delay)
	return n.NodeInterface.Patch(ctx, name, pt, data, opts, sub...)
}

// TestRunStartsAWaveAtOnceWithinBudget: a wave's nodes are assigned
// concurrently, the carrier is detected once for the run, and never more
// nodes than the budget restart at once.
func TestRunStartsAWaveAtOnceWithinBudget(t *testing.T) {
	fakeClient, names := newFleet(t, 20)
	client := &patchCounter{Interface: fakeClient, delay: 30 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	agents := newAgents(fakeClient, 100*time.Millisecond)
	agents.run(ctx, t)
	store := startRollout(t, client, Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(5)})

	r, err := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond})
	if err != nil || r.Status.State != Done {
		t.Fatalf("Run: %v, state %s, want Done", err, r.Status.State)
	}
	client.mu.Lock()
	defer client.mu.Unlock()
	if client.probes != 1 {
		t.Errorf("%d carrier probes, want 1 for the whole run", client.probes)
	}
	if client.peak < 2 || client.peak > 5 {
		t.Errorf("peak %d assignments in flight at once, want 2 to 5 (concurrent, within the budget)", client.peak)
	}
	agents.checkBudgetAndOnce(t, names, 5)
	for _, n := range names {
		node, _ := fakeClient.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if src, carrier, _ := source.Assigned(node); carrier != source.Annotation || !source.Equal(src, cm("good")) {
			t.Errorf("node %s assigned %v through %q, want good through the annotation", n, src, carrier)
		}
	}
}

// TestRunStartsNoNodeAfterAFailure: once an assignment fails, no further
// node is started, though others were under way at once.
func TestRunStartsNoNodeAfterAFailure(t *testing.T) {
	fakeClient, names := newFleet(t, 8)
	client := &patchCounter{Interface: fakeClient, delay: 300 * time.Millisecond, fail: "n1"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store := startRollout(t, client, Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(4)})

	r, err := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond, Parallel: 2})
	if !errors.Is(err, ErrHalted) {
		t.Fatalf("Run: %v, want halted", err)
	}
	if want := `node/n1: patch node "n1": boom`; r.Status.State != Halted || r.Status.Reason != want {
		t.Errorf("state %s %q, want Halted %q", r.Status.State, r.Status.Reason, want)
	}
	client.mu.Lock()
	defer client.mu.Unlock()
	// n1 fails at once; n2 may be under way by then (2 at once), and
	// nothing after it starts.
	for _, n := range client.tried {
		if n != "n1" && n != "n2" {
			t.Errorf("node %s was assigned after n1 failed (tried %v)", n, client.tried)
		}
	}
	for _, n := range names[4:] {
		if p := r.NodeStatus(n).Phase; p != Waiting {
			t.Errorf("node %s %s, want Waiting: its wave never began", n, p)
		}
	}
}

// TestRunStartsNoQueuedNodeAfterANodeFailed: one node at a time, each
// drained; n1 is assigned and its agent reports an error while n2 still
// waits its turn in the same pass. n2 is not drained or assigned: the
// rollout halts on n1.
func TestRunStartsNoQueuedNodeAfterANodeFailed(t *testing.T) {
	setBackPoll(t, 10*time.Millisecond)
	client, names := newFleet(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	agents := newAgents(client, 10*time.Millisecond)
	agents.bad = func(*corev1.NodeConfigSource) bool { return true }
	agents.run(ctx, t)
	store := startRollout(t, client, Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(2), Drain: names})
	d := &fakeDrainer{client: client}
	r, err := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond, Drainer: d, Parallel: 1})
	if !errors.Is(err, ErrHalted) || !strings.HasPrefix(r.Status.Reason, "node/n1: ") {
		t.Fatalf("Run: %v, reason %q; want halted on n1", err, r.Status.Reason)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, call := range d.calls {
		if strings.HasPrefix(call, "drain n2") {
			t.Errorf("drainer calls %q: n2 drained after n1 failed", d.calls)
		}
	}
	if src, _, _ := source.Assigned(nodeOn(ctx, t, client, "n2")); src != nil {
		t.Errorf("n2 assigned %s after n1 failed", DescribeTarget(src))
	}
}

// TestRunStartsNoQueuedNodeOncePaused: a pause that comes while a pass
// drains n1 lets n1 finish starting, and n2, queued in the same pass, is
// not started.
func TestRunStartsNoQueuedNodeOncePaused(t *testing.T) {
	client, names := newFleet(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store := startRollout(t, client, Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(2), Drain: names})
	d := &gateDrainer{fakeDrainer: fakeDrainer{client: client}, draining: make(chan string, 2), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond, Drainer: d, Parallel: 1})
		done <- err
	}()
	if got := <-d.draining; got != "n1" {
		t.Fatalf("first drain of %s, want n1", got)
	}
	if _, err := store.Request(ctx, "r1", Paused, Running); err != nil {
		t.Fatal(err)
	}
	// The driver's informer delivers the pause before the drain ends.
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		r, err := store.Get(ctx, "r1")
		return err == nil && r.Spec.Paused, nil
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	close(d.release)
	if err := <-done; !errors.Is(err, ErrPaused) {
		t.Fatalf("Run: %v, want paused", err)
	}
	n2 := nodeOn(ctx, t, client, "n2")
	if src, _, _ := source.Assigned(n2); src != nil || n2.Spec.Unschedulable {
		t.Errorf("n2 assigned %v, cordoned %v after the pause; want neither", src, n2.Spec.Unschedulable)
	}
	if src, _, _ := source.Assigned(nodeOn(ctx, t, client, "n1")); src == nil {
		t.Error("n1, drained before the pause, not assigned")
	}
}

// gateDrainer is a fakeDrainer whose drains each send the node's name on
// draining, then wait until release is closed.
type gateDrainer struct {
	fakeDrainer
	draining chan string
	release  chan struct{}
}

func (d *gateDrainer) Drain(ctx context.Context, name string, blocked func(Blocked)) error {
	d.draining <- name
	select {
	case <-d.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return d.fakeDrainer.Drain(ctx, name, blocked)
}

// TestPassEndsWhenItsDrainedNodesDoNotComeBack: two nodes drained and
// assigned in one pass whose agents never report do not hold the pass
// waiting for each other to be back: once no drain is under way or
// queued, the pass ends and the next one decides.
func TestPassEndsWhenItsDrainedNodesDoNotComeBack(t *testing.T) {
	setBackPoll(t, 10*time.Millisecond)
	client, names := newFleet(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store := startRollout(t, client, Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(2), Drain: names})
	cur, err := store.Get(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	// The node cache keeps the Nodes as they were: never back.
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	nodes, observed := map[string]*corev1.Node{}, map[string]Observed{}
	for _, n := range names {
		node := nodeOn(ctx, t, client, n)
		if err := indexer.Add(node); err != nil {
			t.Fatal(err)
		}
		nodes[n] = node
		if observed[n], err = Observe(node, cm("good"), nil); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	d, err := decide(cur, observed, nodes, nil, now, Alerts{})
	if err != nil || len(d.Assign) != 2 {
		t.Fatalf("decide: %v, assign %v; want both nodes", err, d.Assign)
	}
	e := &engine{client: client, store: store, nodes: listerscorev1.NewNodeLister(indexer),
		opts: Options{Clock: clock.RealClock{}, StatusInterval: time.Hour, Parallel: 2, Drainer: &fakeDrainer{client: client}},
		cur:  cur, rv: cur.ResourceVersion, assigned: map[string]bool{}, marks: map[string]*Mark{}, written: now}
	done := make(chan error, 1)
	go func() {
		_, err := e.execute(ctx, d, observed, nodes, now)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the pass that drained and assigned both nodes did not end: each waits for the other to be back")
	}
	for _, n := range names {
		if src, _, _ := source.Assigned(nodeOn(ctx, t, client, n)); src == nil {
			t.Errorf("%s not assigned", n)
		}
	}
}

// TestRunEndsOverANodeThatCannotBeRead: a rollout over a node whose mark
// does not decode ends: done, the mark written anew when the node was
// started, or halted on that node when a pass saw the unreadable version
// after the driver started it. No pass stops short of starting it for
// ever.
func TestRunEndsOverANodeThatCannotBeRead(t *testing.T) {
	client, names := newFleet(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n1 := nodeOn(ctx, t, client, "n1")
	n1.Annotations = map[string]string{MarkAnnotation: "{"}
	if _, err := client.CoreV1().Nodes().Update(ctx, n1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	agents := newAgents(client, 10*time.Millisecond)
	agents.run(ctx, t)
	store := startRollout(t, client, Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(1)})
	r, err := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond})
	if err != nil && (!errors.Is(err, ErrHalted) || !strings.HasPrefix(r.Status.Reason, "node/n1: ")) {
		t.Fatalf("Run: %v, reason %q; want done, or halted on n1", err, r.Status.Reason)
	}
}

// TestRunDetectsTheCarrierPerKindOfNode: an apiserver 1.26+ keeps
// spec.configSource on a Node that stores one already, so such a node is
// detected on its own, and assigned natively.
func TestRunDetectsTheCarrierPerKindOfNode(t *testing.T) {
	fakeClient, names := newFleet(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n2, _ := fakeClient.CoreV1().Nodes().Get(ctx, "n2", metav1.GetOptions{})
	n2.Spec.ConfigSource = cm("old")
	n2.Annotations = map[string]string{source.StatusAnnotation: `{"assigned":{"configMap":{"namespace":"kube-system","name":"old","kubeletConfigKey":"kubelet"}},"active":{"configMap":{"namespace":"kube-system","name":"old","kubeletConfigKey":"kubelet"}}}`}
	if _, err := fakeClient.CoreV1().Nodes().Update(ctx, n2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	client := &patchCounter{Interface: fakeClient}
	agents := newAgents(fakeClient, 10*time.Millisecond)
	agents.run(ctx, t)
	store := startRollout(t, client, Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(4)})

	if r, err := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond}); err != nil {
		t.Fatalf("Run: %v, state %s", err, r.Status.State)
	}
	client.mu.Lock()
	defer client.mu.Unlock()
	if client.probes != 2 {
		t.Errorf("%d carrier probes, want 2: one per kind of node", client.probes)
	}
	got := map[string]source.Carrier{}
	for _, n := range names {
		node, _ := fakeClient.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		src, carrier, _ := source.Assigned(node)
		if !source.Equal(src, cm("good")) {
			t.Errorf("node %s assigned %v, want good", n, src)
		}
		got[n] = carrier
	}
	want := map[string]source.Carrier{"n1": source.Annotation, "n2": source.Native, "n3": source.Annotation, "n4": source.Annotation}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("carriers (-want +got):\n%s", diff)
	}
}

// TestFactsReaderAsksForAMissingConfigMapOnce: nodes that report a
// deleted ConfigMap active cost one GET, not one each.
func TestFactsReaderAsksForAMissingConfigMapOnce(t *testing.T) {
	client := fake.NewClientset()
	gets := map[string]int{}
	client.PrependReactor("get", "configmaps", func(action k8stesting.Action) (bool, runtime.Object, error) {
		gets[action.(k8stesting.GetAction).GetName()]++
		return false, nil, nil
	})
	var nodes []corev1.Node
	for i := 1; i <= 3; i++ {
		n := readyNode(fmt.Sprintf("n%d", i), nil)
		n.Annotations = map[string]string{source.StatusAnnotation: `{"active":{"configMap":{"namespace":"kube-system","name":"gone","kubeletConfigKey":"kubelet"}}}`}
		nodes = append(nodes, *n)
	}
	var warnings []string
	p := &FactsReader{Client: client, Warn: func(f string, a ...any) { warnings = append(warnings, fmt.Sprintf(f, a...)) }}
	for range 2 {
		if _, err := p.Read(context.Background(), nodes, []byte("kind: KubeletConfiguration\nmaxPods: 20\n"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(map[string]int{"gone": 1}, gets); diff != "" {
		t.Errorf("GETs per ConfigMap (-want +got):\n%s", diff)
	}
	if len(warnings) != 6 || !strings.Contains(warnings[0], `configmaps "gone" not found`) {
		t.Errorf("warnings %q, want one per node and read, saying gone is not found", warnings)
	}
}

// assignNew is the patch startNode sends to assign a node the target new,
// unpinned: nothing when the node holds it already, else the assignment
// conditional on the Node's resourceVersion, with mark.
func assignNew(mark *Mark) func(node *corev1.Node) ([]byte, error) {
	return func(node *corev1.Node) ([]byte, error) {
		if source.Holds(node, cm("new"), nil) {
			return nil, nil
		}
		patch, err := source.AssignPatchAt(source.Annotation, cm("new"), nil, node.ResourceVersion)
		if err != nil {
			return nil, err
		}
		return markPatch(patch, mark, nil)
	}
}

// TestPatchOver: the rollout's patch of a node is conditional on the Node
// it last saw. A Node that changed otherwise is read again and patched;
// one assigned another config meanwhile (by hand, during its drain) is
// left as it is, unmarked, with the error that halts the rollout.
func TestPatchOver(t *testing.T) {
	ctx := context.Background()
	tests := map[string]struct {
		change   func(*corev1.Node) // on the server, after the cache read
		wantErr  string
		wantHeld *corev1.NodeConfigSource
		wantMark bool
	}{
		"unchanged": {wantHeld: cm("new"), wantMark: true},
		"changed otherwise (a label)": {
			change:   func(n *corev1.Node) { n.Labels = map[string]string{"x": "y"} },
			wantHeld: cm("new"), wantMark: true,
		},
		"assigned its target meanwhile (another driver of the rollout)": {
			change: func(n *corev1.Node) {
				n.Annotations[source.AssignedAnnotation] = `{"configMap":{"namespace":"kube-system","name":"new","kubeletConfigKey":"kubelet"}}`
			},
			wantHeld: cm("new"),
		},
		"assigned by hand meanwhile": {
			change: func(n *corev1.Node) {
				n.Annotations[source.AssignedAnnotation] = `{"configMap":{"namespace":"kube-system","name":"hand","kubeletConfigKey":"kubelet"}}`
			},
			wantErr:  "assignment changed outside the rollout to kube-system/hand while the rollout applied its config (before the rollout: kube-system/old); halted so as not to overwrite it",
			wantHeld: cm("hand"),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client, names := newFleet(t, 1)
			assign(ctx, t, client, names[0], cm("old"))
			cached, err := client.CoreV1().Nodes().Get(ctx, names[0], metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.change != nil {
				// Another client's write: the cached version is stale.
				n := cached.DeepCopy()
				tc.change(n)
				if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			err = patchOver(ctx, client, names[0], cached, cm("old"), assignNew(markOf(cm("old"), false)))
			if got := errString(err); got != tc.wantErr {
				t.Errorf("error %q, want %q", got, tc.wantErr)
			}
			node, err := client.CoreV1().Nodes().Get(ctx, names[0], metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if held, _, _ := source.Assigned(node); !source.Equal(held, tc.wantHeld) {
				t.Errorf("node holds %s, want %s", DescribeTarget(held), DescribeTarget(tc.wantHeld))
			}
			if m, _ := MarkOf(node); (m != nil) != tc.wantMark {
				t.Errorf("node marked %+v, want a mark: %v", m, tc.wantMark)
			}
		})
	}
}

// TestPatchOverRetriesConflicts: a Conflict on the assignment's patch
// reads the Node again and patches again, up to retry.DefaultRetry's
// attempts; a Node that conflicts on every one of them is an error that
// says so, and nothing is assigned.
func TestPatchOverRetriesConflicts(t *testing.T) {
	ctx := context.Background()
	tests := map[string]struct {
		conflicts   int // patches answered with a Conflict before the apiserver's answer
		wantErr     string
		wantPatches int
		wantGets    int
		wantHeld    *corev1.NodeConfigSource
	}{
		"no conflict":  {wantPatches: 1, wantHeld: cm("new")},
		"one conflict": {conflicts: 1, wantPatches: 2, wantGets: 1, wantHeld: cm("new")},
		"a conflict on every attempt": {
			conflicts:   100,
			wantErr:     `patch node "n1": the Node changed under each of 5 attempts`,
			wantPatches: 5,
			wantGets:    4,
			wantHeld:    cm("old"),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client, names := newFleet(t, 1)
			assign(ctx, t, client, names[0], cm("old"))
			cached, err := client.CoreV1().Nodes().Get(ctx, names[0], metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var patches, gets int
			client.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				gets++
				return false, nil, nil
			})
			client.PrependReactor("patch", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
				patches++
				if patches <= tc.conflicts {
					return true, nil, apierrors.NewConflict(corev1.Resource("nodes"), action.(k8stesting.PatchActionImpl).Name, errors.New("the object has been modified"))
				}
				return false, nil, nil
			})
			err = patchOver(ctx, client, names[0], cached, cm("old"), assignNew(nil))
			if got := errString(err); got != tc.wantErr {
				t.Errorf("error %q, want %q", got, tc.wantErr)
			}
			if patches != tc.wantPatches || gets != tc.wantGets {
				t.Errorf("%d patches and %d reads of the Node, want %d and %d", patches, gets, tc.wantPatches, tc.wantGets)
			}
			node, err := client.CoreV1().Nodes().Get(ctx, names[0], metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if held, _, _ := source.Assigned(node); !source.Equal(held, tc.wantHeld) {
				t.Errorf("node holds %s, want %s", DescribeTarget(held), DescribeTarget(tc.wantHeld))
			}
		})
	}
}
