package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kubectl-dkc/dkc/pkg/pool"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// pools reconciles the NodeConfigPools of the namespace: for each, it
// reads the pool, the nodes, the pool's rollouts and its config's bytes,
// asks pool.Decide what to do, and does it: create a rollout, abort a
// superseded one, pause or resume one, write the pool's status.
type pools struct {
	c        *Controller
	queue    workqueue.TypedRateLimitingInterface[string]
	pools    cache.Indexer
	rollouts cache.Indexer
	nodes    cache.Indexer
	// pending queues the names of nodes with the startup taint, to remove
	// it from those that no pool selects (untaint).
	pending workqueue.TypedRateLimitingInterface[string]
}

// enqueueAll looks at every pool again: a node changed.
func (p *pools) enqueueAll() {
	for _, obj := range p.pools.List() {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			p.queue.Add(u.GetName())
		}
	}
}

// watchConfigMaps looks at a pool again when the ConfigMap its config
// names is created, changed or deleted: a pool applied before its
// ConfigMap waits for it (ConfigUnavailable), and an edit of the bytes a
// revision pinned stalls the pool (DigestMismatch). inf holds the
// ConfigMaps' metadata only: a pool reads the bytes it needs (payload).
func (p *pools) watchConfigMaps(inf cache.SharedIndexInformer) error {
	changed := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return
		}
		for _, o := range p.pools.List() {
			u, ok := o.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			cur, err := pool.Decode(u)
			if err != nil {
				p.queue.Add(u.GetName()) // its status says why
				continue
			}
			if ref := cur.Spec.ConfigSource.ConfigMap; ref != nil && ref.Namespace == m.GetNamespace() && ref.Name == m.GetName() {
				p.queue.Add(u.GetName())
			}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    changed,
		UpdateFunc: func(_, obj any) { changed(obj) },
		DeleteFunc: changed,
	}); err != nil {
		return fmt.Errorf("watch configmaps: %w", err)
	}
	return nil
}

// nodeChanged reports whether a Node's update can change a pool's
// decision or counts: its labels, dkc's annotations, readiness,
// schedulability or startup taint. Heartbeats alone do not.
func nodeChanged(old, cur *corev1.Node) bool {
	if !maps.Equal(old.Labels, cur.Labels) || !maps.Equal(old.Annotations, cur.Annotations) ||
		old.Spec.Unschedulable != cur.Spec.Unschedulable || rollout.IsReady(old) != rollout.IsReady(cur) ||
		source.Pending(old) != source.Pending(cur) {
		return true
	}
	return !apiequality.Semantic.DeepEqual(old.Spec.ConfigSource, cur.Spec.ConfigSource) ||
		!apiequality.Semantic.DeepEqual(old.Status.Config, cur.Status.Config)
}

func (p *pools) next(ctx context.Context) bool {
	name, shutdown := p.queue.Get()
	if shutdown {
		return false
	}
	defer p.queue.Done(name)
	if err := p.reconcile(ctx, name); err != nil {
		klog.FromContext(ctx).Error(err, "Reconciling pool failed; retrying", "pool", name)
		p.queue.AddRateLimited(name)
		return true
	}
	p.queue.Forget(name)
	return true
}

func (p *pools) reconcile(ctx context.Context, name string) error {
	ns := p.c.Store.Namespace
	obj, exists, err := p.pools.GetByKey(ns + "/" + name)
	if err != nil || !exists {
		return err
	}
	cur, err := pool.Decode(obj.(*unstructured.Unstructured))
	if err != nil {
		return err
	}
	in := pool.Input{Pool: cur, Now: p.c.Clock.Now()}
	for _, o := range p.pools.List() {
		if other, err := pool.Decode(o.(*unstructured.Unstructured)); err == nil {
			in.Others = append(in.Others, other)
		}
	}
	for _, o := range p.nodes.List() {
		in.Nodes = append(in.Nodes, o.(*corev1.Node))
	}
	var all []*rollout.Rollout
	for _, o := range p.rollouts.List() {
		if r, err := rollout.Decode(o.(*unstructured.Unstructured)); err == nil {
			all = append(all, r)
		}
	}
	in.Rollouts, in.Foreign = pool.Split(name, all)
	in.Payload, in.PayloadErr = p.payload(ctx, cur)

	logger := klog.FromContext(ctx).WithValues("pool", name)
	out := pool.Decide(in)
	if out.Planned {
		// The plan's drains compare the config with what the nodes run:
		// read that now, and only now.
		nodes := make([]corev1.Node, len(in.Nodes))
		for i, n := range in.Nodes {
			nodes[i] = *n
		}
		reader := &rollout.FactsReader{Client: p.c.Kube, Warn: func(format string, args ...any) {
			logger.Info("Planning a rollout: " + fmt.Sprintf(format, args...))
		}}
		facts, err := reader.Read(ctx, nodes, in.Payload, nil)
		if err != nil {
			return err
		}
		in.Configs = facts.Configs
		out = pool.Decide(in)
	}
	for _, w := range out.Warnings {
		logger.Info("Planning a rollout: " + w)
	}
	var errs []error
	for _, r := range out.Abort {
		if _, err := p.c.Store.Request(ctx, r, rollout.Aborted, rollout.Running, rollout.Paused, rollout.Halted); err != nil {
			errs = append(errs, err)
			continue
		}
		logger.Info("Aborted rollout of an older revision", "rollout", r)
	}
	for _, r := range out.Pause {
		if _, err := p.c.Store.Request(ctx, r, rollout.Paused, rollout.Running); err != nil {
			errs = append(errs, err)
		}
	}
	for _, r := range out.Resume {
		if _, err := p.c.Store.Request(ctx, r, rollout.Running, rollout.Paused); err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range out.Join {
		if err := p.join(ctx, name, out.JoinTarget, out.JoinPin); err != nil {
			errs = append(errs, err)
			continue
		}
		logger.Info("Assigned a joining node its pool's current revision", "node", name, "revision", out.Status.Revision)
	}
	if out.Create != nil {
		created, err := p.c.Store.Create(ctx, out.Create, false)
		switch {
		case err == nil:
			logger.Info("Created rollout", "rollout", created.Name, "revision", out.Status.Revision, "selector", created.Spec.Selector, "listedNodes", len(created.Spec.Nodes))
		case errors.Is(err, rollout.ErrExists):
			// Created by this controller before it died, or by the leader
			// before this one: the informer has not shown it yet.
		default:
			errs = append(errs, err)
		}
	}
	if !apiequality.Semantic.DeepEqual(cur.Status, out.Status) {
		next := cur.DeepCopy()
		next.Status = out.Status
		if _, err := p.c.Pools.UpdateStatus(ctx, next); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// join assigns the node named name, which carries the startup taint,
// target pinned by pin, over whatever it holds as the node cache shows it.
func (p *pools) join(ctx context.Context, name string, target *corev1.NodeConfigSource, pin *source.Pin) error {
	obj, exists, err := p.nodes.GetByKey(name)
	if err != nil || !exists {
		return err
	}
	node := obj.(*corev1.Node)
	held, _, err := source.Assigned(node)
	if err != nil {
		return fmt.Errorf("assign joining node %q: %w", name, err)
	}
	return rollout.Assign(ctx, p.c.Kube, name, node, target, pin, held)
}

// enqueuePending queues every node that carries the startup taint: a pool
// changed, and may no longer select it.
func (p *pools) enqueuePending() {
	for _, obj := range p.nodes.List() {
		if n, ok := obj.(*corev1.Node); ok && source.Pending(n) {
			p.pending.Add(n.Name)
		}
	}
}

func (p *pools) nextPending(ctx context.Context) bool {
	name, shutdown := p.pending.Get()
	if shutdown {
		return false
	}
	defer p.pending.Done(name)
	if err := p.untaint(ctx, name); err != nil {
		klog.FromContext(ctx).Error(err, "Removing the startup taint failed; retrying", "node", name)
		p.pending.AddRateLimited(name)
		return true
	}
	p.pending.Forget(name)
	return true
}

// untaint removes the startup taint from the node named name at once when
// no pool selects it: no pool would configure it. A node that a pool
// selects keeps it until its agent removes it, once the pool's config is
// active on it and passed its health gate.
func (p *pools) untaint(ctx context.Context, name string) error {
	obj, exists, err := p.nodes.GetByKey(name)
	if err != nil || !exists {
		return err
	}
	node := obj.(*corev1.Node)
	if !source.Pending(node) {
		return nil
	}
	var all []*pool.Pool
	for _, o := range p.pools.List() {
		cur, err := pool.Decode(o.(*unstructured.Unstructured))
		if err != nil {
			return err // retried: a pool that cannot be read may select it
		}
		all = append(all, cur)
	}
	if !pool.Unselected(all, node) {
		return nil
	}
	if err := source.RemoveStartupTaint(ctx, p.c.Kube.CoreV1().Nodes(), name, node); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Removed the startup taint from a node that no pool selects", "node", name, "taint", source.StartupTaint)
	return nil
}

// payload reads the bytes of cur's config.
func (p *pools) payload(ctx context.Context, cur *pool.Pool) ([]byte, error) {
	ref := cur.Spec.ConfigSource.ConfigMap
	if ref == nil {
		return nil, errors.New("spec.configSource names no configMap")
	}
	cm, err := p.c.Kube.CoreV1().ConfigMaps(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get configmap %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return source.Payload(cm, ref.KubeletConfigKey)
}
