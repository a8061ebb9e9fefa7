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
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubectl-dkc/dkc/pkg/pool"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// Controller drives the NodeConfigRollouts of one namespace: a work queue
// hands each rollout that needs a driver to rollout.Reconciler, a pass at
// a time, until the rollout is done, halted, aborted or paused; each pass
// says when to look again, and a change of the rollout or of its nodes
// brings the next one sooner. Its informer sees pause, resume and abort
// (the rollout's spec) and new rollouts. It must run only while it leads:
// see RunLeader.
type Controller struct {
	Kube  kubernetes.Interface
	Store *rollout.Store
	// Pools are the NodeConfigPools of Store's namespace; nil: none are
	// reconciled.
	Pools *pool.Store
	// Metadata watches the metadata of the ConfigMaps of Store's
	// namespace, so that a pool waiting for its ConfigMap, or whose
	// ConfigMap changed, is looked at again at once. Nil: a pool sees
	// its ConfigMap change only with the next change of a node, a
	// rollout or a pool.
	Metadata metadata.Interface
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Log receives a line per pod that a rollout's drain evicts.
	Log io.Writer
	// Options are the engine's options; Log is set from Log.
	Options rollout.Options

	// Workers is how many rollouts are reconciled at once
	// (DefaultWorkers when 0): a pass that drains nodes holds its worker
	// until they are drained.
	Workers int

	queue    workqueue.TypedRateLimitingInterface[string]
	indexer  cache.Indexer
	rollouts *rollout.Reconciler
	// mu guards reported, the state last logged of each rollout driven,
	// and indexer, which the metrics' collector reads.
	mu       sync.Mutex
	reported map[string]rollout.State

	wg sync.WaitGroup
}

// DefaultWorkers is Controller.Workers' default.
const DefaultWorkers = 4

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
	c.reported = map[string]rollout.State{}
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
	}
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
	opts := c.Options
	opts.Nodes, opts.Rollouts, opts.Log = nodes, inf, c.Log
	if opts.Clock == nil {
		opts.Clock = c.Clock
	}
	var err error
	if c.rollouts, err = rollout.NewReconciler(c.Kube, c.Store, opts, c.queue.Add); err != nil {
		return err
	}
	defer c.rollouts.Close()
	var p *pools
	if c.Pools != nil {
		var err error
		if p, err = c.watchPools(f, inf, nodes); err != nil {
			return err
		}
		if c.Metadata != nil {
			// Only a prompt: nothing waits for it to list, so that a Role
			// without list and watch on ConfigMaps delays pools, and stops
			// nothing.
			mf := metadatainformer.NewFilteredSharedInformerFactory(c.Metadata, 0, c.Store.Namespace, nil)
			if err := p.watchConfigMaps(mf.ForResource(corev1.SchemeGroupVersion.WithResource("configmaps")).Informer()); err != nil {
				return err
			}
			mf.Start(ctx.Done())
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
	for range c.Workers {
		c.wg.Go(func() {
			for c.next(ctx) {
			}
		})
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
	c.reconcile(ctx, name)
	return true
}

// reconcile makes a pass over rollout name when it needs a driver, and
// has the queue hand it out again when the pass asks.
func (c *Controller) reconcile(ctx context.Context, name string) {
	logger := klog.FromContext(ctx).WithValues("rollout", name)
	if !c.rollouts.Driving(name) {
		obj, exists, err := c.indexer.GetByKey(c.Store.Namespace + "/" + name)
		if err != nil || !exists {
			return
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		r, err := rollout.Decode(u)
		if err != nil {
			logger.Error(err, "Cannot read rollout")
			return
		}
		if !NeedsDriver(r) {
			return
		}
		logger.Info("Driving rollout")
	}
	res, err := c.rollouts.Reconcile(ctx, name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := res.Rollout; r != nil && r.Status.State != c.reported[name] {
		c.reported[name] = r.Status.State
		logger.Info("Rollout state", "state", r.Status.State, "wave", r.Status.Wave, "reason", r.Status.Reason)
	}
	switch {
	case ctx.Err() != nil:
		return
	case errors.Is(err, rollout.ErrNotFound):
		logger.Info("Rollout deleted")
		delete(c.reported, name)
		c.queue.Forget(name)
	case res.Done && (err == nil || errors.Is(err, rollout.ErrPaused) || errors.Is(err, rollout.ErrHalted) || errors.Is(err, rollout.ErrAborted)):
		logger.Info("Stopped driving rollout", "state", c.reported[name])
		delete(c.reported, name)
		// Its spec may have changed during the pass.
		c.queue.Forget(name)
		c.queue.Add(name)
	case err != nil:
		logger.Error(err, "Driving rollout failed; retrying")
		c.queue.AddRateLimited(name)
	default:
		c.queue.Forget(name)
		c.queue.AddAfter(name, res.RequeueAfter)
	}
}
