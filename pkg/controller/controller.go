package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubectl-dkc/dkc/pkg/pool"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// Controller drives the NodeConfigRollouts of one namespace: each one that
// needs a driver gets one engine (rollout.Run) of its own, until the
// rollout is done, halted, aborted or paused. Its informer sees pause,
// resume and abort (the rollout's spec) and new rollouts, and it drives
// them again as needed. It must run only while it leads: see RunLeader.
type Controller struct {
	Kube  kubernetes.Interface
	Store *rollout.Store
	// Pools are the NodeConfigPools of Store's namespace; nil: none are
	// reconciled.
	Pools *pool.Store
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Log receives a line per pod that a rollout's drain evicts.
	Log io.Writer
	// Options are the engine's options; Log is set from Log.
	Options rollout.Options

	queue   workqueue.TypedRateLimitingInterface[string]
	indexer cache.Indexer

	mu      sync.Mutex
	driving map[string]bool
	wg      sync.WaitGroup
}

// NeedsDriver reports whether r needs an engine to drive it: it is Running,
// or its spec asks for a state (paused, resumed, aborted) that its status
// does not show yet.
func NeedsDriver(r *rollout.Rollout) bool {
	st := r.State()
	return st == rollout.Running || st != r.Status.State
}

// Run drives rollouts and reconciles pools until ctx ends, and then waits
// for the rollouts' engines to stop.
func (c *Controller) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	c.driving = map[string]bool{}
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "dkc-controller"})
	defer c.queue.ShutDown()

	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.Store.Client, 0, c.Store.Namespace, nil)
	inf := f.ForResource(rollout.Resource).Informer()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			_, name, _ := cache.SplitMetaNamespaceKey(key)
			c.queue.Add(name)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return fmt.Errorf("watch nodeconfigrollouts: %w", err)
	}
	c.mu.Lock() // the metrics' collector reads it
	c.indexer = inf.GetIndexer()
	c.mu.Unlock()
	// One informer on the nodes, for the pools and every rollout's engine.
	nf := informers.NewSharedInformerFactory(c.Kube, 0)
	nodes := nf.Core().V1().Nodes().Informer()
	if err := nodes.SetTransform(rollout.SlimNode); err != nil {
		return fmt.Errorf("watch nodes: %w", err)
	}
	c.Options.Nodes = nodes
	c.Options.Rollouts = inf
	var p *pools
	if c.Pools != nil {
		var err error
		if p, err = c.watchPools(f, inf, nodes); err != nil {
			return err
		}
	}
	nf.Start(ctx.Done())
	for typ, ok := range nf.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("watch %v: %w", typ, ctx.Err())
		}
	}
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("watch %v: %w", typ, ctx.Err())
		}
	}
	logger.Info("Driving rollouts", "namespace", c.Store.Namespace, "pools", c.Pools != nil)
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
		if p != nil {
			p.queue.ShutDown()
			p.pending.ShutDown()
		}
	}()
	if p != nil {
		p.enqueueAll()
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for p.next(ctx) {
			}
		}()
		// The pools' cache has synced: only now can a node be known to
		// be selected by none.
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for p.nextPending(ctx) {
			}
		}()
	}
	for c.next(ctx) {
	}
	c.wg.Wait()
	return ctx.Err()
}

// watchPools sets up the pools' reconciler on the rollouts' informer
// factory f (rollouts is its rollouts' informer), with an informer on the
// pools, and the nodes' informer.
func (c *Controller) watchPools(f dynamicinformer.DynamicSharedInformerFactory, rollouts, nodeInf cache.SharedIndexInformer) (*pools, error) {
	p := &pools{c: c, queue: workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "dkc-pools"}),
		pending: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "dkc-pending-nodes"})}
	poolInf := f.ForResource(pool.Resource).Informer()
	if _, err := poolInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		// A pool's selector decides which nodes the others may take, and
		// which nodes with the startup taint no pool selects.
		AddFunc:    func(any) { p.enqueueAll(); p.enqueuePending() },
		UpdateFunc: func(_, obj any) { p.enqueueAll(); p.enqueuePending() },
		DeleteFunc: func(any) { p.enqueueAll(); p.enqueuePending() },
	}); err != nil {
		return nil, fmt.Errorf("watch nodeconfigpools: %w", err)
	}
	onRollout := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if u, ok := obj.(*unstructured.Unstructured); ok {
			if name := u.GetLabels()[pool.Label]; name != "" {
				p.queue.Add(name)
			} else {
				p.enqueueAll() // its end may free nodes a pool waits for
			}
		}
	}
	if _, err := rollouts.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onRollout,
		UpdateFunc: func(_, obj any) { onRollout(obj) },
		DeleteFunc: onRollout,
	}); err != nil {
		return nil, err
	}
	onPending := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok && source.Pending(n) {
			p.pending.Add(n.Name)
		}
	}
	if _, err := nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { p.enqueueAll(); onPending(obj) },
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*corev1.Node)
			n, ok2 := cur.(*corev1.Node)
			if !ok1 || !ok2 || nodeChanged(o, n) {
				p.enqueueAll()
				onPending(cur)
			}
		},
		DeleteFunc: func(any) { p.enqueueAll() },
	}); err != nil {
		return nil, fmt.Errorf("watch nodes: %w", err)
	}
	p.pools, p.rollouts, p.nodes = poolInf.GetIndexer(), rollouts.GetIndexer(), nodeInf.GetIndexer()
	return p, nil
}

func (c *Controller) next(ctx context.Context) bool {
	name, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(name)
	if err := c.reconcile(ctx, name); err != nil {
		klog.FromContext(ctx).Error(err, "Reconcile failed; retrying", "rollout", name)
		c.queue.AddRateLimited(name)
		return true
	}
	return true
}

// reconcile starts an engine for rollout name if it needs one and none
// runs.
func (c *Controller) reconcile(ctx context.Context, name string) error {
	obj, exists, err := c.indexer.GetByKey(c.Store.Namespace + "/" + name)
	if err != nil || !exists {
		return err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("unexpected object %T", obj)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.driving[name] {
		// Its engine sees the change itself. Every write of a running
		// rollout comes here: no need to decode it.
		return nil
	}
	r, err := rollout.Decode(u)
	if err != nil {
		return err
	}
	if !NeedsDriver(r) {
		return nil
	}
	c.driving[name] = true
	c.wg.Add(1)
	go c.drive(ctx, name)
	return nil
}

// drive runs the engine on rollout name until it stops, and has the
// rollout looked at again: its spec may have changed meanwhile.
func (c *Controller) drive(ctx context.Context, name string) {
	defer c.wg.Done()
	logger := klog.FromContext(ctx).WithValues("rollout", name)
	logger.Info("Driving rollout")
	opts := c.Options
	opts.Log = c.Log
	var last rollout.State
	opts.OnChange = func(r *rollout.Rollout, _ map[string]rollout.Observed) {
		if r.Status.State != last {
			last = r.Status.State
			logger.Info("Rollout state", "state", r.Status.State, "wave", r.Status.Wave, "reason", r.Status.Reason)
		}
	}
	r, err := rollout.Run(ctx, c.Kube, c.Store, name, opts)
	c.mu.Lock()
	delete(c.driving, name)
	c.mu.Unlock()
	switch {
	case ctx.Err() != nil:
		return
	case err == nil, errors.Is(err, rollout.ErrPaused), errors.Is(err, rollout.ErrHalted), errors.Is(err, rollout.ErrAborted):
		state := rollout.State("")
		if r != nil {
			state = r.Status.State
		}
		logger.Info("Stopped driving rollout", "state", state)
		c.queue.Forget(name)
		c.queue.Add(name)
	case errors.Is(err, rollout.ErrNotFound):
		logger.Info("Rollout deleted")
	default:
		logger.Error(err, "Driving rollout failed; retrying")
		c.queue.AddRateLimited(name)
	}
}
