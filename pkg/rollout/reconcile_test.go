package rollout

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kubectl-dkc/dkc/pkg/lease"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// TestReconcilerDrivesRolloutsFromOneWorker: three rollouts, each over
// nodes of its own, all reach Done through one worker of a work queue
// that calls Reconcile, each pass requeued after what it asks: no
// rollout holds a goroutine (or the worker) between its passes.
func TestReconcilerDrivesRolloutsFromOneWorker(t *testing.T) {
	client, names := newFleet(t, 6)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	agents := newAgents(client, 20*time.Millisecond)
	agents.run(ctx, t)
	store := newStore()
	rollouts := []string{"a", "b", "c"}
	for i, name := range rollouts {
		createRollout(t, store, New(source.DefaultNamespace, name, Spec{Config: cm("good"), Nodes: names[2*i : 2*i+2], MaxUnavailable: intstr.FromInt32(1)}))
	}
	opts := Options{LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}
	queue := workqueue.NewTypedDelayingQueue[string]()
	defer queue.ShutDown()
	rc := newReconciler(ctx, t, client, store, opts, queue.Add)
	defer rc.Close()
	for _, name := range rollouts {
		queue.Add(name)
	}
	done := map[string]bool{}
	passes := 0
	for len(done) < len(rollouts) {
		name, shutdown := queue.Get()
		if shutdown || ctx.Err() != nil {
			t.Fatalf("done %v after %d passes: %v", done, passes, ctx.Err())
		}
		passes++
		res, err := rc.Reconcile(ctx, name)
		switch {
		case err != nil:
			t.Fatalf("Reconcile(%s): %v", name, err)
		case res.Done:
			if res.Rollout.Status.State != Done {
				t.Fatalf("rollout %s ended %s", name, res.Rollout.Status.State)
			}
			done[name] = true
		case res.RequeueAfter > opts.RetryPeriod:
			t.Errorf("rollout %s requeued after %s, beyond the Lease's renewal period %s", name, res.RequeueAfter, opts.RetryPeriod)
		default:
			queue.AddAfter(name, res.RequeueAfter)
		}
		queue.Done(name)
		if rc.Driving(name) != !done[name] {
			t.Errorf("Driving(%s) = %t after a pass, done %t", name, rc.Driving(name), done[name])
		}
	}
	agents.checkBudgetAndOnce(t, names, 3) // a budget of 1 each
	for _, name := range rollouts {
		if holder, err := lease.Holder(ctx, client, store.Namespace, LeaseName(name), time.Now()); err != nil || holder != "" {
			t.Errorf("lease of %s: holder %q, %v; want it released once the rollout is done", name, holder, err)
		}
	}
}

// TestReconcileOnlyRenewsWhenNothingHappened: a call with no event, no
// resync and no soak's end since the last pass renews the Lease (when it
// is due) and makes no pass.
func TestReconcileOnlyRenewsWhenNothingHappened(t *testing.T) {
	client, names := newFleet(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store := newStore()
	createRollout(t, store, New(source.DefaultNamespace, "r1", Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(1),
		Windows: Windows{mustWindow(t, "Mon 06:00 1h")}}))
	clock := testingclock.NewFakeClock(t0)
	rc := newReconciler(ctx, t, client, store, Options{Clock: clock}, func(string) {})
	defer rc.Close()
	var (
		res Result
		err error
	)
	for range 2 { // the second pass sees the first one's write
		if res, err = rc.Reconcile(ctx, "r1"); err != nil || res.Done {
			t.Fatalf("Reconcile: %v, done %t", err, res.Done)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r, err := store.Get(ctx, "r1"); err != nil || r.Status.Reason == "" {
		t.Fatalf("rollout %v, %v; want it held outside its window", r, err)
	}
	resyncAt := rc.engines["r1"].resyncAt
	var reads, renewals atomic.Int32
	client.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch {
		case a.GetResource().Resource == "leases" && a.GetVerb() == "update":
			renewals.Add(1)
		case a.GetResource().Resource != "leases":
			reads.Add(1)
		}
		return false, nil, nil
	})
	for range 3 {
		clock.Step(2 * time.Second)
		if res, err = rc.Reconcile(ctx, "r1"); err != nil || res.Done {
			t.Fatalf("Reconcile: %v, done %t", err, res.Done)
		}
	}
	if reads.Load() != 0 || renewals.Load() != 3 {
		t.Errorf("three calls 2 s apart made %d requests other than the Lease's and %d renewals; want none and 3", reads.Load(), renewals.Load())
	}
	if e := rc.engines["r1"]; e.dirty.Load() || !e.resyncAt.Equal(resyncAt) {
		t.Errorf("a pass was made (the resync moved from %s to %s), or is asked for (%t)", resyncAt, e.resyncAt, e.dirty.Load())
	}
}

// newReconciler returns a Reconciler of store's rollouts with opts, over
// informers of its own, started and synced.
func newReconciler(ctx context.Context, t *testing.T, client kubernetes.Interface, store *Store, opts Options, enqueue func(string)) *Reconciler {
	t.Helper()
	nf := informers.NewSharedInformerFactory(client, 0)
	rf := dynamicinformer.NewFilteredDynamicSharedInformerFactory(store.Client, 0, store.Namespace, nil)
	opts.Nodes, opts.Rollouts = nf.Core().V1().Nodes().Informer(), rf.ForResource(Resource).Informer()
	rc, err := NewReconciler(client, store, opts, enqueue)
	if err != nil {
		t.Fatal(err)
	}
	nf.Start(ctx.Done())
	rf.Start(ctx.Done())
	nf.WaitForCacheSync(ctx.Done())
	rf.WaitForCacheSync(ctx.Done())
	return rc
}

// newFollower starts rollout r1 over two nodes and a follower (ReadOnly)
// of it on a fake clock, which has made its first pass.
func newFollower(t *testing.T) (context.Context, *Store, *testingclock.FakeClock, *Reconciler) {
	t.Helper()
	client, names := newFleet(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	store := newStore()
	createRollout(t, store, New(source.DefaultNamespace, "r1", Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(1)}))
	clock := testingclock.NewFakeClock(t0)
	rc := newReconciler(ctx, t, client, store, Options{Clock: clock, ReadOnly: true}, func(string) {})
	t.Cleanup(rc.Close)
	if res, err := rc.Reconcile(ctx, "r1"); err != nil || res.Done {
		t.Fatalf("Reconcile: %v, done %t", err, res.Done)
	}
	return ctx, store, clock, rc
}

// TestFollowerSeesTheRolloutAtOnce: the interval between a follower's
// passes holds back the nodes' changes, not the rollout's own: its driver
// marking it Done ends `rollout status -w` at once, not up to an interval
// later.
func TestFollowerSeesTheRolloutAtOnce(t *testing.T) {
	ctx, store, clock, rc := newFollower(t)
	r, err := store.Get(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	r.Status.State = Done
	if _, err := store.UpdateStatus(ctx, r); err != nil {
		t.Fatal(err)
	}
	e := rc.engines["r1"]
	for !e.isStale() {
		if ctx.Err() != nil {
			t.Fatal("the informer did not deliver the rollout's change")
		}
		time.Sleep(10 * time.Millisecond)
	}
	clock.Step(100 * time.Millisecond)
	res, err := rc.Reconcile(ctx, "r1")
	if err != nil || !res.Done {
		t.Fatalf("Reconcile %s after the last pass, the rollout Done: %v, done %t; want done at once", 100*time.Millisecond, err, res.Done)
	}
	if res.Rollout == nil || res.Rollout.Status.State != Done {
		t.Errorf("rollout after the pass: %v, want state Done", res.Rollout)
	}
}

// A version of the rollout that the informer delivers while the loop reads
// that same version does not leave the loop's copy stale: a follower would
// make one more pass for nothing.
func TestReadVersionIsCurrent(t *testing.T) {
	e := &engine{}
	r := New(source.DefaultNamespace, "r1", Spec{})
	r.ResourceVersion = "2"
	e.delivered("2", false)
	e.setCurrent(r)
	if e.isStale() {
		t.Error("stale after reading the version the informer delivered")
	}
	e.delivered("3", false)
	e.setCurrent(r)
	if !e.isStale() {
		t.Error("not stale after reading version 2 with version 3 delivered")
	}
}

// TestFollowerShowsChangesTogether: a follower (ReadOnly) makes at most
// one pass per FollowInterval, however many events come: each looks at
// every node, and one per event cost a core at 5000 nodes.
func TestFollowerShowsChangesTogether(t *testing.T) {
	ctx, _, clock, rc := newFollower(t)
	e := rc.engines["r1"]
	first := e.passed
	for range 3 {
		e.poke()
		clock.Step(100 * time.Millisecond)
		res, err := rc.Reconcile(ctx, "r1")
		if err != nil || res.Done {
			t.Fatalf("Reconcile: %v, done %t", err, res.Done)
		}
		if wait := first.Add(DefaultFollowInterval).Sub(clock.Now()); res.RequeueAfter != wait {
			t.Errorf("requeued after %s, want %s: the rest of the interval", res.RequeueAfter, wait)
		}
	}
	if !e.passed.Equal(first) {
		t.Fatalf("a pass %s after the last one", e.passed.Sub(first))
	}
	clock.Step(200 * time.Millisecond)
	if _, err := rc.Reconcile(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if !e.passed.Equal(clock.Now()) || e.dirty.Load() {
		t.Errorf("no pass once the interval passed (last at %s, now %s), or one still asked for", e.passed, clock.Now())
	}
}
