// The driver as a reconciler: Reconcile(name) makes one pass over a
// rollout, from shared informers, and says when to look again. The
// controller calls it from a work queue; Run calls it in a local loop
// where no controller runs. Between passes nothing runs: what a pass
// needs from the ones before is either on the cluster (the rollout, each
// node's Mark, the Lease) or a cache of it (engine).

package rollout

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubectl-dkc/dkc/pkg/lease"
)

// Reconciler drives the rollouts of one namespace, a pass at a time: each
// call of Reconcile looks at one rollout and its nodes once, acts on what
// it sees, and returns when to look again. One driver acts on a rollout at
// a time: the holder of the rollout's Lease (LeaseName), which Reconcile
// takes or renews before it acts (lease.Fence). A Reconciler that does not
// hold it follows: it reports each node's phase and acts on nothing, and
// takes the Lease over when its holder stops renewing it. Each node's part
// is on the node (Mark), so any driver picks a rollout up where another
// left it.
//
// Reconcile must not be called for the same rollout from two goroutines at
// once; a work queue, which hands out each key to one worker at a time,
// calls it right.
type Reconciler struct {
	client  kubernetes.Interface
	store   *Store
	opts    Options
	nodes   listerscorev1.NodeLister
	enqueue func(name string)

	mu      sync.Mutex
	engines map[string]*engine
}

// Result is what a pass of Reconcile found.
type Result struct {
	// Rollout is the rollout as the pass last read or wrote it, with its
	// nodes (Resolve) and their phases.
	Rollout *Rollout
	// Done means the rollout needs no driver now: it is done, or (with
	// the error that says so) halted, aborted or paused, or deleted.
	Done bool
	// RequeueAfter is when to call Reconcile again, if no event came
	// first: a soak's or a window's end, the next Lease renewal, a
	// resync.
	RequeueAfter time.Duration
}

// NewReconciler returns a Reconciler for the rollouts of store. Options
// Nodes and Rollouts must be informers on the Nodes and on store's
// rollouts, started by the caller; the Reconciler adds its handlers to
// them, and calls enqueue with a rollout's name when a change of its nodes
// or of its object asks for a pass.
func NewReconciler(client kubernetes.Interface, store *Store, opts Options, enqueue func(name string)) (*Reconciler, error) {
	if opts.Nodes == nil || opts.Rollouts == nil {
		return nil, errors.New("a reconciler needs informers on the nodes and the rollouts")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Resync <= 0 {
		opts.Resync = DefaultResync
	}
	if opts.Parallel <= 0 {
		opts.Parallel = DefaultParallel
	}
	if opts.StatusInterval <= 0 {
		opts.StatusInterval = DefaultStatusInterval
	}
	if opts.AlertInterval <= 0 {
		opts.AlertInterval = DefaultAlertInterval
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = http.DefaultClient
	}
	if opts.Identity == "" {
		host, _ := os.Hostname()
		opts.Identity = fmt.Sprintf("%s_%d", host, os.Getpid())
	}
	if opts.RetryPeriod <= 0 {
		opts.RetryPeriod = lease.DefaultRetryPeriod
	}
	if opts.FollowInterval <= 0 {
		opts.FollowInterval = DefaultFollowInterval
	}
	rc := &Reconciler{client: client, store: store, opts: opts, enqueue: enqueue,
		nodes: listerscorev1.NewNodeLister(opts.Nodes.GetIndexer()), engines: map[string]*engine{}}
	onNode := func(obj any) {
		n, ok := obj.(*corev1.Node)
		for _, e := range rc.driven() {
			if !ok || e.targets == nil || e.targets[n.Name] {
				e.poke()
			}
		}
	}
	if _, err := opts.Nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onNode,
		UpdateFunc: func(_, obj any) { onNode(obj) },
		DeleteFunc: func(any) { onNode(nil) },
	}); err != nil {
		return nil, fmt.Errorf("watch nodes: %w", err)
	}
	onRollout := func(obj any, deleted bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		rc.mu.Lock()
		e := rc.engines[u.GetName()]
		rc.mu.Unlock()
		if e == nil {
			return
		}
		if deleted {
			e.delivered("", true)
			return
		}
		paused, _, _ := unstructured.NestedBool(u.Object, "spec", "paused")
		aborted, _, _ := unstructured.NestedBool(u.Object, "spec", "aborted")
		e.delivered(u.GetResourceVersion(), paused || aborted)
	}
	if _, err := opts.Rollouts.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { onRollout(obj, false) },
		UpdateFunc: func(_, obj any) { onRollout(obj, false) },
		DeleteFunc: func(obj any) { onRollout(obj, true) },
	}); err != nil {
		return nil, fmt.Errorf("watch nodeconfigrollouts: %w", err)
	}
	return rc, nil
}

func (rc *Reconciler) driven() []*engine {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make([]*engine, 0, len(rc.engines))
	for _, e := range rc.engines {
		out = append(out, e)
	}
	return out
}

// Driving reports whether the Reconciler drives or follows rollout name:
// a pass looked at it and it needed a driver then.
func (rc *Reconciler) Driving(name string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.engines[name] != nil
}

// Reconcile makes one pass over rollout name (see Reconciler). It returns
// an error matching ErrHalted, ErrAborted or ErrPaused, with Done, when the
// rollout is in that state; ErrNotFound when it does not exist; another
// error when the pass failed and should be tried again.
func (rc *Reconciler) Reconcile(ctx context.Context, name string) (Result, error) {
	e, err := rc.engine(ctx, name)
	if err != nil {
		return Result{Done: errors.Is(err, ErrNotFound)}, err
	}
	res, err := e.reconcile(ctx)
	if res.Done || err != nil {
		rc.Forget(name)
	}
	return res, err
}

// Forget drops what the Reconciler holds for rollout name and releases its
// Lease when it holds it, so that another driver takes over at once.
func (rc *Reconciler) Forget(name string) {
	rc.mu.Lock()
	e := rc.engines[name]
	delete(rc.engines, name)
	rc.mu.Unlock()
	if e == nil || e.fence == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.fence.Release(ctx); err != nil {
		klog.Background().V(2).Info("Could not release the rollout's lease; it expires by itself", "rollout", name, "err", err)
	}
}

// Close forgets every rollout (Forget).
func (rc *Reconciler) Close() {
	for _, e := range rc.driven() {
		rc.Forget(e.cur.Name)
	}
}

// engine returns the engine of rollout name, set up from the rollout as
// the server holds it when there is none.
func (rc *Reconciler) engine(ctx context.Context, name string) (*engine, error) {
	rc.mu.Lock()
	e := rc.engines[name]
	rc.mu.Unlock()
	if e != nil {
		return e, nil
	}
	r, err := rc.store.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	opts := rc.opts
	e = &engine{client: rc.client, store: rc.store, opts: opts, nodes: rc.nodes, cur: r, rv: r.ResourceVersion,
		assigned: map[string]bool{}, marks: map[string]*Mark{},
		alerts: alertPoller{client: opts.HTTPClient, interval: opts.AlertInterval, restrict: opts.RestrictAlertmanagers, allowed: opts.Alertmanagers}}
	e.wakeup = func() { rc.enqueue(name) }
	if len(r.Spec.Nodes) > 0 {
		e.targets = map[string]bool{}
		for _, n := range r.Spec.Nodes {
			e.targets[n] = true
		}
	}
	if e.opts.Drainer == nil {
		e.opts.Drainer = &KubeDrainer{Client: rc.client, Options: DrainOptions{
			Timeout:            r.Spec.DrainOptions.Timeout.Duration,
			Force:              r.Spec.DrainOptions.Force,
			DeleteEmptyDirData: r.Spec.DrainOptions.DeleteEmptyDirData,
			GracePeriodSeconds: -1,
		}, Out: opts.Log}
	}
	if !opts.ReadOnly {
		e.fence = &lease.Fence{Client: rc.client, Namespace: rc.store.Namespace, Name: LeaseName(name), Identity: opts.Identity,
			LeaseDuration: opts.LeaseDuration, RenewDeadline: opts.RenewDeadline, RetryPeriod: opts.RetryPeriod, Clock: opts.Clock}
	}
	e.dirty.Store(true)
	rc.mu.Lock()
	rc.engines[name] = e
	rc.mu.Unlock()
	return e, nil
}

// reconcile makes a pass, under the rollout's Lease when this driver holds
// it. A call that comes only to renew the Lease (no event, no resync, no
// soak's end since the last pass) renews it and makes no pass.
func (e *engine) reconcile(ctx context.Context) (Result, error) {
	now := e.opts.Clock.Now()
	idle := !e.dirty.Load() && now.Before(e.resyncAt) && (e.wake.IsZero() || now.Before(e.wake))
	var lead context.Context
	if e.fence != nil {
		if idle && e.fence.Holding() {
			if ok, err := e.fence.TryHold(ctx); ok && err == nil {
				return e.result(now), nil
			}
		}
		tenure, stop, err := e.fence.Hold(ctx)
		defer stop()
		switch {
		case apierrors.IsForbidden(err):
			return Result{Rollout: e.cur, Done: true}, fmt.Errorf("cannot take lease %s, which fences the rollout's driver: %w (the role kubectl-dkc:rollout-operator grants it)", LeaseName(e.cur.Name), err)
		case err != nil:
			klog.FromContext(ctx).Info("Could not take the rollout's lease; following meanwhile", "rollout", e.cur.Name, "err", err)
		}
		if tenure == nil && e.held {
			klog.FromContext(ctx).Info("Rollout lease held by another driver; following until it is free", "rollout", e.cur.Name, "holder", e.fence.Holder())
		}
		e.held = tenure != nil
		lead = tenure
	} else if idle {
		return e.result(now), nil
	} else if next := e.passed.Add(e.opts.FollowInterval); now.Before(next) && !e.isStale() {
		// Following: the nodes' changes since the last pass are shown
		// together; a change of the rollout itself (its state, its
		// counts), which its driver writes seldom, at once.
		return Result{Rollout: e.cur, RequeueAfter: next.Sub(now)}, nil
	}
	e.passed = now
	e.dirty.Store(false)
	e.resyncAt = now.Add(e.opts.Resync)
	finished, err := e.pass(ctx, lead)
	if finished || err != nil {
		return Result{Rollout: e.cur, Done: true}, err
	}
	return e.result(e.opts.Clock.Now()), nil
}

// result says when to look at the rollout again: at once after an event
// that came during the pass, at a soak's or hold's end, to renew or take
// the Lease, and at the resync.
func (e *engine) result(now time.Time) Result {
	if e.dirty.Load() {
		return Result{Rollout: e.cur}
	}
	next := e.resyncAt
	if !e.wake.IsZero() && e.wake.Before(next) {
		next = e.wake
	}
	after := max(next.Sub(now), 0)
	if e.fence != nil {
		after = min(after, e.opts.RetryPeriod)
	}
	return Result{Rollout: e.cur, RequeueAfter: after}
}

// engine is what a Reconciler holds of one rollout between passes: caches
// of what the cluster holds (the rollout, the nodes' observations and
// marks, the carriers), the marks and assignments it wrote that the node
// cache may not show yet, and when to look again.
type engine struct {
	client kubernetes.Interface
	store  *Store
	opts   Options
	cur    *Rollout
	nodes  listerscorev1.NodeLister
	// targets are the nodes the rollout lists; nil when it lists none
	// (a selector, or an undo's marks).
	targets map[string]bool
	// fence holds the rollout's Lease; nil when following (ReadOnly).
	fence *lease.Fence
	held  bool
	// dirty is set by an event that asks for a pass; wakeup asks the
	// host for one.
	dirty  atomic.Bool
	wakeup func()
	// resyncAt is when the next pass is due without an event; passed is
	// when the last pass began.
	resyncAt, passed time.Time
	// wake is when a soak ends, a window opens, or the Alertmanager is
	// asked again (Decision.Wake); zero when none.
	wake time.Time
	// assigned holds the nodes this driver assigned, and marks the marks
	// it wrote: the node cache may not show them yet.
	assigned map[string]bool
	marks    map[string]*Mark
	// seenMarks holds the mark of each node's last seen version.
	seenMarks map[string]seenMark
	// written is when this driver last wrote the rollout; reported the
	// counts last passed to OnChange.
	written  time.Time
	reported Counts
	// carriers holds the carrier detected for this run.
	carriers carrierCache
	// observations holds what each node's last seen version showed.
	observations observations
	// notices say why a node being started waits (notice.go); claims
	// hold the budgets that nodes' kubelet restarts count against
	// (pdb.go).
	notices notices
	claims  claims
	// drainsLeft counts the nodes of the pass's starts still to drain or
	// draining, drainsInFlight those draining (start.go); inProgress, the
	// nodes in progress when the pass decided, those it starts among them.
	drainsLeft, drainsInFlight atomic.Int32
	inProgress                 []string
	// last is the rollout last reported while following.
	last *Rollout
	// alerts asks the Alertmanager of spec.pauseOnAlerts.
	alerts alertPoller

	// mu guards what the informers' handlers share with the passes: the
	// resourceVersion the pass last wrote or read, whether the server
	// holds a different one, the last one the informer delivered and
	// whether it asks that no node start, and the marks written.
	mu        sync.Mutex
	rv        string
	stale     bool
	seen      string
	stopAsked bool
}

// poke asks for a pass.
func (e *engine) poke() {
	e.dirty.Store(true)
	if e.wakeup != nil {
		e.wakeup()
	}
}

// Run drives the rollout name of store until it is done, halted, aborted or
// paused, or ctx ends: a Reconciler in a local loop, for the CLI where no
// controller runs. It watches the rollout's nodes and its object, and
// reconciles on every change, at the time each pass asks for, and at
// Options.Resync. With Options.ReadOnly it follows the rollout (`rollout
// status -w`).
//
// Run returns the rollout as last read, and nil when it is Done, an error
// matching ErrHalted, ErrAborted or ErrPaused, or ctx's error.
func Run(ctx context.Context, client kubernetes.Interface, store *Store, name string, opts Options) (*Rollout, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	r, err := store.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := informOn(ctx, client, store, r, &opts); err != nil {
		return r, err
	}
	kick := make(chan struct{}, 1)
	rc, err := NewReconciler(client, store, opts, func(string) {
		select {
		case kick <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return r, err
	}
	defer rc.Close()
	for {
		res, err := rc.Reconcile(ctx, name)
		if res.Rollout != nil {
			r = res.Rollout
		}
		if res.Done || err != nil {
			if ctx.Err() != nil {
				return r, ctx.Err()
			}
			return r, err
		}
		timer := opts.Clock.NewTimer(res.RequeueAfter)
		select {
		case <-ctx.Done():
			timer.Stop()
			return r, ctx.Err()
		case <-kick:
		case <-timer.C():
		}
		timer.Stop()
	}
}

// informOn sets opts' Nodes and Rollouts, where unset, to informers of their
// own on the nodes and on r, and starts them. The node informer watches
// every node, not only those r's selector picks: r covers the nodes it
// started that left the selector too (Covers), and they count against its
// budget until they are done.
func informOn(ctx context.Context, client kubernetes.Interface, store *Store, r *Rollout, opts *Options) error {
	var nf informers.SharedInformerFactory
	if opts.Nodes == nil {
		nf = informers.NewSharedInformerFactory(client, 0)
		opts.Nodes = nf.Core().V1().Nodes().Informer()
		if err := opts.Nodes.SetTransform(SlimNode); err != nil {
			return fmt.Errorf("watch nodes: %w", err)
		}
		nf.Start(ctx.Done())
	}
	var rf dynamicinformer.DynamicSharedInformerFactory
	if opts.Rollouts == nil {
		rf = dynamicinformer.NewFilteredDynamicSharedInformerFactory(store.Client, 0, store.Namespace, func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", r.Name).String()
		})
		opts.Rollouts = rf.ForResource(Resource).Informer()
		rf.Start(ctx.Done())
	}
	if nf != nil {
		for typ, ok := range nf.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("watch %v: %w", typ, ctx.Err())
			}
		}
	}
	if rf != nil {
		for typ, ok := range rf.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("watch rollout %q %v: %w", r.Name, typ, ctx.Err())
			}
		}
	}
	return nil
}
