package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dkc/dkc/pkg/lease"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// Lease timings short enough for a test, with room for a loaded machine:
// the holder renews every 100 ms and stops after 1 s without a renewal,
// another takes over 2 s after the last one. (client-go's leaderelection
// counts a Lease's duration in whole seconds.)
func leaseOptions(identity string) Options {
	return Options{Resync: 50 * time.Millisecond, Identity: identity,
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}
}

// budgetWatch counts, after every change of a Node, the nodes that the
// rollout of uid marked and that do not run target Ready and schedulable:
// the nodes it holds out of service. It keeps the most there were at once.
type budgetWatch struct {
	mu   sync.Mutex
	peak int
}

func watchBudget(client *fake.Clientset, uid types.UID, target *corev1.NodeConfigSource) *budgetWatch {
	w := &budgetWatch{}
	nodes := corev1.SchemeGroupVersion.WithResource("nodes")
	client.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if len(a.(k8stesting.PatchActionImpl).PatchOptions.DryRun) > 0 {
			return false, nil, nil
		}
		handled, obj, err := patchVersioned(client.Tracker(), nodes, a.(k8stesting.PatchActionImpl))
		list, lerr := client.Tracker().List(nodes, corev1.SchemeGroupVersion.WithKind("Node"), "")
		if lerr != nil {
			return handled, obj, err
		}
		out := 0
		for i := range list.(*corev1.NodeList).Items {
			node := &list.(*corev1.NodeList).Items[i]
			m, _ := MarkOf(node)
			if m == nil || m.UID != uid {
				continue
			}
			if o, _ := Observe(node, target, nil); !(o.Running && o.Ready && o.Schedulable) {
				out++
			}
		}
		w.mu.Lock()
		w.peak = max(w.peak, out)
		w.mu.Unlock()
		return handled, obj, err
	})
	return w
}

func (w *budgetWatch) check(t *testing.T, budget int) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.peak > budget {
		t.Errorf("%d nodes marked and not done at once, budget %d", w.peak, budget)
	}
	if w.peak == 0 {
		t.Error("no node was ever marked and not done: the watch saw nothing")
	}
}

// events is a log of what the drivers did, in order, shared by the
// reactors and hooks of a test.
type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) add(format string, a ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, fmt.Sprintf(format, a...))
}

func (e *events) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.log...)
}

// logLeases adds to ev "lease <holder>" for each write of a Lease that
// changes its holder; cut, when it returns true for a holder, fails that
// holder's writes, as for a driver cut off from the apiserver.
func logLeases(client *fake.Clientset, ev *events, cut func(holder string) bool) {
	last := ""
	react := func(a k8stesting.Action) (bool, runtime.Object, error) {
		l, ok := a.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease)
		if !ok {
			return false, nil, nil
		}
		holder := ptr.Deref(l.Spec.HolderIdentity, "")
		if cut != nil && cut(holder) {
			return true, nil, errors.New("cut off")
		}
		// Only a write that will succeed changes the holder: not a
		// create that loses to another's, nor a stale update.
		cur, err := client.Tracker().Get(coordinationv1.SchemeGroupVersion.WithResource("leases"), l.Namespace, l.Name)
		switch {
		case a.GetVerb() == "create" && err == nil:
			return false, nil, nil
		case a.GetVerb() == "update" && (err != nil || cur.(*coordinationv1.Lease).ResourceVersion != l.ResourceVersion):
			return false, nil, nil
		}
		if holder != last {
			last = holder
			ev.add("lease %s", holder)
		}
		return false, nil, nil
	}
	client.PrependReactor("create", "leases", react)
	client.PrependReactor("update", "leases", react)
}

// driverClient is a driver's view of the fleet, logging each of its Node
// patches to ev as "<identity> patches <node>".
func driverClient(fleet *fake.Clientset, identity string, ev *events) *patchCounter {
	return &patchCounter{Interface: fleet, assigning: func(node string) { ev.add("%s patches %s", identity, node) }}
}

// TestTwoDriversKeepTheBudget runs two drivers of one rollout at once. One
// holds the rollout's Lease and drives; the other follows. Midway, the
// driver is cut off from the Lease (its renewals fail): it stops, the
// other takes over once the Lease expires and finishes the rollout. Never
// more nodes than the budget are marked and not done at once, no node
// applies twice, and the driver cut off patches no node once the other
// began to.
func TestTwoDriversKeepTheBudget(t *testing.T) {
	fleet, names := newFleet(t, 24)
	budget := watchBudget(fleet, r1UID, cm("good"))
	ev := &events{}
	var (
		mu  sync.Mutex
		cut string
	)
	logLeases(fleet, ev, func(holder string) bool {
		mu.Lock()
		defer mu.Unlock()
		return holder != "" && holder == cut
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Eight rounds of 300ms: the Lease changes hands about halfway.
	// (A cut off driver stops within 1 s; the other takes over after 2.)
	agents := newAgents(fleet, 300*time.Millisecond)
	agents.run(ctx, t)
	store := startRollout(t, fleet, Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(3)})

	type result struct {
		id  string
		r   *Rollout
		err error
	}
	results := make(chan result, 2)
	for _, id := range []string{"a", "b"} {
		go func() {
			r, err := Run(ctx, driverClient(fleet, id, ev), store, "r1", leaseOptions(id))
			results <- result{id, r, err}
		}()
	}
	// Once three nodes are done, cut the driver off.
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		agents.mu.Lock()
		defer agents.mu.Unlock()
		return len(agents.finished) >= 3, nil
	}); err != nil {
		t.Fatalf("three nodes never finished: %v", err)
	}
	var driver string
	for _, e := range ev.all() {
		if h, ok := strings.CutPrefix(e, "lease "); ok && h != "" {
			driver = h
		}
	}
	mu.Lock()
	cut = driver
	mu.Unlock()

	for range 2 {
		res := <-results
		if res.err != nil || res.r.Status.State != Done {
			t.Errorf("driver %s: %v, state %s; want Done", res.id, res.err, res.r.Status.State)
		}
	}
	budget.check(t, 3)
	agents.checkBudgetAndOnce(t, names, 3)

	log := ev.all()
	other := map[string]string{"a": "b", "b": "a"}[driver]
	took := -1
	for i, e := range log {
		if e == "lease "+other {
			took = i
			break
		}
	}
	if took < 0 {
		t.Fatalf("driver %s never took the Lease over from %s:\n%s", other, driver, strings.Join(log, "\n"))
	}
	otherPatched := false
	for _, e := range log[took:] {
		if strings.HasPrefix(e, driver+" patches ") {
			t.Errorf("driver %s patched a node after %s took the Lease over: %s", driver, other, e)
		}
		otherPatched = otherPatched || strings.HasPrefix(e, other+" patches ")
	}
	if !otherPatched {
		t.Errorf("driver %s took over and patched no node:\n%s", other, strings.Join(log, "\n"))
	}
}

// TestRunTakesOverTheLeaseOfADeadDriver: a Lease its holder no longer
// renews is taken over once it expires, and only then does the driver
// patch a node; it then finishes the rollout.
func TestRunTakesOverTheLeaseOfADeadDriver(t *testing.T) {
	fleet, names := newFleet(t, 3)
	ev := &events{}
	logLeases(fleet, ev, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	past := metav1.NewMicroTime(time.Now().Add(-time.Hour))
	if _, err := fleet.CoordinationV1().Leases(source.DefaultNamespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: source.DefaultNamespace, Name: LeaseName("r1")},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("dead"), LeaseDurationSeconds: ptr.To[int32](1),
			AcquireTime: &past, RenewTime: &past},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	agents := newAgents(fleet, 10*time.Millisecond)
	agents.run(ctx, t)
	store := startRollout(t, fleet, Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(1)})

	r, err := Run(ctx, driverClient(fleet, "me", ev), store, "r1", leaseOptions("me"))
	if err != nil || r.Status.State != Done {
		t.Fatalf("Run: %v, state %s; want Done", err, r.Status.State)
	}
	log := ev.all()
	if len(log) < 3 || log[0] != "lease dead" || log[1] != "lease me" || !strings.HasPrefix(log[2], "me patches ") {
		t.Errorf("want the dead driver's Lease taken over before any node is patched; got:\n%s", strings.Join(log, "\n"))
	}
	agents.checkBudgetAndOnce(t, names, 1)
}

// TestRunFollowsWhileAnotherDriverHoldsTheLease: while another driver
// holds and renews the rollout's Lease, Run only follows the rollout: it
// reports it, patches no node and writes nothing. Once that driver lets
// the Lease go, Run drives the rollout at once.
func TestRunFollowsWhileAnotherDriverHoldsTheLease(t *testing.T) {
	fleet, names := newFleet(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store := startRollout(t, fleet, Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(1)})

	otherCtx, stopOther := context.WithCancel(ctx)
	defer stopOther()
	otherDone := make(chan struct{})
	go func() {
		defer close(otherDone)
		el := &lease.Election{Client: fleet, Namespace: source.DefaultNamespace, Name: LeaseName("r1"), Identity: "other",
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}
		_ = el.Run(otherCtx, func(tenure context.Context) { <-tenure.Done() })
	}()
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		h, err := lease.Holder(ctx, fleet, source.DefaultNamespace, LeaseName("r1"), time.Now())
		return h == "other", err
	}); err != nil {
		t.Fatalf("the other driver never held the Lease: %v", err)
	}

	client := &patchCounter{Interface: fleet}
	var reported []Counts
	opts := leaseOptions("me")
	opts.OnChange = func(r *Rollout, _ map[string]Observed) { reported = append(reported, Count(r)) }
	followCtx, stopFollowing := context.WithTimeout(ctx, 5*time.Second) // over two Lease durations
	defer stopFollowing()
	if _, err := Run(followCtx, client, store, "r1", opts); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run: %v, want the deadline: it only follows", err)
	}
	client.mu.Lock()
	if len(client.tried) > 0 {
		t.Errorf("patched %v while another driver held the Lease", client.tried)
	}
	client.mu.Unlock()
	if diff := cmp.Diff([]Counts{{Waiting: 2}}, reported); diff != "" {
		t.Errorf("reports while following (-want +got):\n%s", diff)
	}
	if got, err := store.Get(ctx, "r1"); err != nil || got.Status.State != "" {
		t.Errorf("rollout %+v, %v: want it as created, written by no driver", got.Status, err)
	}

	stopOther()
	<-otherDone
	agents := newAgents(fleet, 10*time.Millisecond)
	agents.run(ctx, t)
	driveCtx, stopDriving := context.WithTimeout(ctx, 10*time.Second)
	defer stopDriving()
	if r, err := Run(driveCtx, client, store, "r1", leaseOptions("me")); err != nil || r.Status.State != Done {
		t.Fatalf("Run after the other driver let the Lease go: %v, want Done", err)
	}
}

// TestRunAssignsANodeADeadDriverMarked: a driver died after it marked a
// node and before it assigned it. The next driver assigns that node first,
// counts it against the budget, and keeps the dead driver's mark: the
// assignment the node held before, for undo.
func TestRunAssignsANodeADeadDriverMarked(t *testing.T) {
	fleet, names := newFleet(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	deadMark := markOf(cm("old"), false)
	n3 := withMark(t, runningOn(t, readyNode("n3", nil), cm("old")), deadMark)
	if _, err := fleet.CoreV1().Nodes().Update(ctx, n3, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	budget := watchBudget(fleet, r1UID, cm("good"))
	agents := newAgents(fleet, 20*time.Millisecond)
	agents.run(ctx, t)
	r := New(source.DefaultNamespace, "r1", Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(1)})
	r.Status.State = Running
	store := newStore()
	createRollout(t, store, r)

	got, err := Run(ctx, fleet, store, "r1", Options{Resync: 50 * time.Millisecond})
	if err != nil || got.Status.State != Done {
		t.Fatalf("Run: %v, state %s; want Done", err, got.Status.State)
	}
	agents.mu.Lock()
	order := append([]string(nil), agents.order...)
	agents.mu.Unlock()
	if diff := cmp.Diff([]string{"n3", "n1", "n2", "n4"}, order); diff != "" {
		t.Errorf("nodes in the order they applied (-want +got):\n%s", diff)
	}
	agents.checkBudgetAndOnce(t, names, 1)
	budget.check(t, 1)
	if diff := cmp.Diff(deadMark, markOn(ctx, t, fleet, "n3")); diff != "" {
		t.Errorf("n3's mark (-dead driver's +now):\n%s", diff)
	}
	if rec := got.NodeStatus("n3"); rec.Phase != Succeeded || !source.Equal(rec.Previous, cm("old")) {
		t.Errorf("n3 %+v, want Done, with previous old", rec)
	}
}

// TestRunStatusSizeDoesNotGrowWithTheNodes: a rollout's stored status
// counts its nodes and lists none of them, so it is as large over 1000
// nodes as over 10, but for the counts' digits.
func TestRunStatusSizeDoesNotGrowWithTheNodes(t *testing.T) {
	size := map[int]int{}
	for _, n := range []int{10, 1000} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		client := fake.NewClientset()
		var names []string
		for i := 1; i <= n; i++ {
			name := fmt.Sprintf("n%d", i)
			names = append(names, name)
			node := withMark(t, runningOn(t, readyNode(name, nil), cm("good")), markOf(nil, false))
			if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		store := startRollout(t, client, Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromString("10%")})
		if r, err := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond}); err != nil || r.Status.State != Done {
			t.Fatalf("%d nodes: Run: %v; want Done", n, err)
		}
		st := storedStatus(ctx, t, store, "r1")
		if _, ok := st["nodes"]; ok {
			t.Errorf("%d nodes: the stored status lists the nodes", n)
		}
		if got := st["counts"].(map[string]any)["updated"]; got != int64(n) {
			t.Errorf("%d nodes: counts.updated %v, want %d", n, got, n)
		}
		data, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		size[n] = len(data)
	}
	if size[1000] != size[10]+2 {
		t.Errorf("the status over 1000 nodes takes %d bytes, over 10 %d: want 2 more (the digits of the count)", size[1000], size[10])
	}
}
