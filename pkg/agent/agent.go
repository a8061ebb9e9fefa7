// Package agent is the node half of dkc: the loop that the kubelet itself ran
// for Dynamic Kubelet Configuration until 1.24. It watches its own Node and
// the one ConfigMap assigned to it, checkpoints the ConfigMap, checks the
// config before anything touches the kubelet, writes the kubelet's config,
// restarts the kubelet, gates on its health, falls back to the last-known-good
// config, promotes a config to last-known-good after a trial, and reports
// status, a Node condition and Events.
//
// Every effect sits behind an interface (kubelet.Writer, kubelet.Restarter,
// kubelet.Prober, the checkpoint store, the clock), so the loop is tested
// with fakes; what needs an apiserver and a kubelet is proven in test/e2e.
package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubectl-dkc/dkc/pkg/checkpoint"
	"github.com/kubectl-dkc/dkc/pkg/kubeclient"
	"github.com/kubectl-dkc/dkc/pkg/kubelet"
	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// Defaults of the Agent's durations.
const (
	DefaultHealthTimeout = 2 * time.Minute
	// DefaultTrialDuration is upstream's 10-minute last-known-good trial.
	DefaultTrialDuration = 10 * time.Minute
)

// Agent runs the DKC loop for one node.
type Agent struct {
	Client   kubeclient.Interface
	NodeName string
	// Store is the checkpoint store under --dynamic-config-dir.
	Store     *checkpoint.Store
	Writer    kubelet.Writer
	Restarter kubelet.Restarter
	Prober    kubelet.Prober
	Clock     clock.WithTicker
	// Recorder records Events on the Node; nil records none.
	Recorder record.EventRecorder
	Metrics  *Metrics
	// KubeletRootDir holds the CPU and memory manager state files.
	KubeletRootDir string
	// HealthTimeout bounds the health gate's kubelet checks after each
	// restart.
	HealthTimeout time.Duration
	// Signals measures the node's eviction signals now, for the bounds
	// (kubeletconfig.CheckBounds); nil measures none. Default: hostSignals
	// of KubeletRootDir.
	Signals func() map[string]kubeletconfig.Signal
	// PodReadyTimeout bounds the health gate's wait, after the kubelet's
	// checks passed, for the pods that were Ready before the restart to be
	// Ready again (pods.go).
	PodReadyTimeout time.Duration
	// TrialDuration is how long an applied config must run before it
	// becomes last-known-good.
	TrialDuration time.Duration
	// NodeMonitorGracePeriod is kube-controller-manager's
	// --node-monitor-grace-period: how long the node may go without a
	// heartbeat before it turns Unknown. The bounds keep the lease and
	// status intervals under it, and the trial judges the Lease by it;
	// 0 means kubeletconfig.DefaultNodeMonitorGracePeriod.
	NodeMonitorGracePeriod time.Duration
	// OnDrift is DriftReport (default) or DriftReassert: what to do when
	// the kubelet's config holds bytes the agent never wrote.
	OnDrift string
	// DriftCheckInterval is how often the agent syncs (and so compares the
	// kubelet's config with its record) when nothing else makes it;
	// default DefaultDriftCheckInterval, negative: never.
	DriftCheckInterval time.Duration
	// Started, when set, is called once, after start-up has put the
	// kubelet's config where the record says and before the agent talks to
	// the apiserver: the point a service manager may start the kubelet.
	Started func()
	// ProbePod, when set, makes the health gate start a pod on the node
	// after a restart and wait for it to be Ready (probepod.go); nil turns
	// that check off.
	ProbePod *ProbePod
	// Confinement, when set, makes the agent check after start-up that the
	// admission policies confine its identity, and start syncing only then
	// (confinement.go); nil skips the check.
	Confinement *Confinement

	// refused is the last config that failed its checks, not checked again
	// until the assignment or the ConfigMap changes.
	refused *refusal
	// verify, when set, makes the first sync gate a config in trial on the
	// kubelet's health, with Ready updated since *verify.
	verify *time.Time

	// downloadFailed is the download error last reported with an Event,
	// so that a ConfigMap that stays unreadable is reported once, not on
	// every retry.
	downloadFailed string
	// judging is the pin of the assignment the current sync judges, which
	// its reports record beside the status (source.JudgedPin); nil for
	// none.
	judging *source.Pin
	// warnedAnnotation is the uid/resourceVersion of the ConfigMap last
	// warned about for source.AllowUnsafeAnnotation.
	warnedAnnotation string
	// drifted is the hash of the drifted content last reported, so that
	// drift is reported once per distinct content.
	drifted string

	cms configMapWatch
	// podView shows the pods bound to the node; Run watches them.
	podView podView
	// nodes is Run's informer's view of the Node; nil outside Run.
	nodes corelisters.NodeLister
	// flagsRead is when publishFlags last read the kubelet's flags; zero
	// before the first read and after each restart.
	flagsRead time.Time
	// leaseRenewed is the latest renewTime of the node's Lease that a
	// trial check read; zero before the first.
	leaseRenewed time.Time
}

func (a *Agent) setDefaults() {
	if a.Clock == nil {
		a.Clock = clock.RealClock{}
	}
	if a.Metrics == nil {
		a.Metrics = NewMetrics()
	}
	if a.HealthTimeout == 0 {
		a.HealthTimeout = DefaultHealthTimeout
	}
	if a.Signals == nil {
		a.Signals = func() map[string]kubeletconfig.Signal { return hostSignals(a.KubeletRootDir) }
	}
	if a.PodReadyTimeout == 0 {
		a.PodReadyTimeout = DefaultPodReadyTimeout
	}
	if a.DriftCheckInterval == 0 {
		a.DriftCheckInterval = DefaultDriftCheckInterval
	}
}

// nodeKey is the work queue's only key: there is one node to sync.
const nodeKey = "node"

// Run puts the kubelet on the config the checkpoint store names (without
// the apiserver), then watches the Node and its ConfigMap and syncs on each
// change until ctx ends. It returns nil when ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	a.setDefaults()
	logger := klog.FromContext(ctx).WithValues("node", a.NodeName)
	ctx = klog.NewContext(ctx, logger)

	if err := a.startup(ctx); err != nil {
		return fmt.Errorf("startup: %w", err)
	}
	if a.Started != nil {
		a.Started()
	}
	// Nothing is applied before the admission policies are in force for
	// the agent's identity.
	if !a.awaitConfinement(ctx) {
		return nil
	}
	if a.ProbePod == nil {
		logger.Info("The health gate's new-pod check is off: no probe pod template (--probe-pod-template)")
	} else {
		// A probe pod left by an agent that died in a gate.
		a.deleteProbePod(ctx)
	}

	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "dkc-agent", Clock: a.Clock},
	)
	enqueue := func(any) { queue.Add(nodeKey) }
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, _ any) { queue.Add(nodeKey) },
		DeleteFunc: enqueue,
	}

	// Only this Node: a field selector, never a list of every node.
	nodes := cache.NewSharedIndexInformer(kubeclient.NodeListWatch(a.Client, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", a.NodeName).String()
	}), &corev1.Node{}, 0, cache.Indexers{})
	if _, err := nodes.AddEventHandler(handler); err != nil {
		return fmt.Errorf("watch node: %w", err)
	}
	a.cms = configMapWatch{client: a.Client, handler: handler, enqueue: func() { queue.Add(nodeKey) }, clock: a.Clock}
	if a.podView == nil {
		pods, err := watchPods(ctx, a.Client, a.NodeName, a.Clock, func() { queue.Add(nodeKey) })
		if err != nil {
			return fmt.Errorf("watch pods: %w", err)
		}
		a.podView = pods
	}
	var informerDone sync.WaitGroup
	informerDone.Go(func() { nodes.RunWithContext(ctx) })
	a.nodes = corelisters.NewNodeLister(nodes.GetIndexer())

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for a.processNext(ctx, queue, a.nodes) {
		}
	}()
	logger.Info("Agent started; watching the node and its assigned ConfigMap")
	<-ctx.Done()
	queue.ShutDown()
	wg.Wait()
	a.cms.stop()
	informerDone.Wait()
	logger.Info("Agent stopped")
	return nil
}

func (a *Agent) processNext(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string], nodes corelisters.NodeLister) bool {
	key, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(key)
	requeue, err := a.syncNode(ctx, nodes)
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		a.Metrics.SyncErrors.Inc()
		klog.FromContext(ctx).Error(err, "Sync failed; retrying")
		queue.AddRateLimited(key)
		return true
	}
	queue.Forget(key)
	// The drift check: a sync at least every DriftCheckInterval compares
	// the kubelet's config with the record; it makes no API request unless
	// something changed.
	if d := a.DriftCheckInterval; d > 0 && (requeue <= 0 || requeue > d) {
		requeue = d
	}
	if requeue > 0 {
		queue.AddAfter(key, requeue)
	}
	return true
}

// syncNode syncs the Node as the informer sees it.
func (a *Agent) syncNode(ctx context.Context, nodes corelisters.NodeLister) (time.Duration, error) {
	node, err := nodes.Get(a.NodeName)
	if apierrors.IsNotFound(err) {
		klog.FromContext(ctx).Info("Node not found; waiting for it")
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if src, _, err := source.Assigned(node); err == nil && src == nil {
		a.cms.stop()
	}
	requeue, err := a.sync(ctx, node.DeepCopy(), a.cms.get) // publish updates its node
	due, werr := a.cms.watch()
	if werr != nil && err == nil {
		err = fmt.Errorf("watch the assigned ConfigMap: %w", werr)
	}
	if due > 0 && (requeue <= 0 || due < requeue) {
		requeue = due
	}
	return requeue, err
}

// getTimeout bounds configMapWatch.get's GET.
const getTimeout = 10 * time.Second

// configMapWatch is an informer on the one ConfigMap assigned to the node,
// replaced when the assignment names another one.
//
// Its reflector lists and watches with client-go's backoff (0.8 s doubling
// to 30 s). Until the first list succeeds, the last list error is kept, so
// that a ConfigMap the agent may not read (no RBAC in its namespace) shows in
// the node's status instead of only in the agent's log; each error and the
// first sync queue the node again.
type configMapWatch struct {
	client  kubeclient.Interface
	handler cache.ResourceEventHandler
	// enqueue queues the node for a sync.
	enqueue func()

	mu        sync.Mutex
	namespace string
	name      string
	informer  cache.SharedIndexInformer
	lister    corelisters.ConfigMapLister
	cancel    context.CancelFunc
	// done is closed when the informer has stopped.
	done chan struct{}
	// listErr holds the last error of the informer's list before its
	// first sync.
	listErr *lastError
	// got is the answer of the GET of namespace/name (the ConfigMap, or
	// nil for NotFound), which serves until the informer has listed.
	got *getResult
	// clock times startAt: when watch starts the informer on
	// namespace/name; zero until a watch asked for it.
	clock   clock.Clock
	startAt time.Time
}

// Watch starts spread over watchSpread from watchDelay after the sync that
// first asked for them: the agents of a rollout's wave end their applies
// together, and the watches, which only catch a later change of the
// ConfigMap, then do not compete with their status reports and the next
// wave's assignments (docs/performance.md).
const (
	watchDelay  = 500 * time.Millisecond
	watchSpread = 1500 * time.Millisecond
)

// getResult is a GET's ConfigMap, or its NotFound error.
type getResult struct {
	cm  *corev1.ConfigMap
	err error
}

// lastError is an error set by one goroutine and read by another. It has
// its own lock: the reflector sets it while configMapWatch.mu may be held
// by a Shutdown that waits for that reflector.
type lastError struct {
	mu  sync.Mutex
	err error
}

func (l *lastError) set(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = err
}

func (l *lastError) get() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// listError is a failure to list the assigned ConfigMap: the agent cannot
// download it. The informer keeps retrying.
type listError struct {
	err error
}

func (e *listError) Error() string { return e.err.Error() }
func (e *listError) Unwrap() error { return e.err }

// detail is the apiserver's message, such as `configmaps "x" is forbidden:
// User "..." cannot list resource "configmaps" ...`, else the error.
func (e *listError) detail() string {
	var s apierrors.APIStatus
	if errors.As(e.err, &s) && s.Status().Message != "" {
		return s.Status().Message
	}
	return e.err.Error()
}

// get returns the ConfigMap ns/name from its informer once that has
// listed. Until then it returns a *listError when the informer's list
// failed, else the ConfigMap from a GET, or NotFound when it does not exist.
// A GET that fails otherwise (such as Forbidden) starts the informer and
// returns errNotSynced: the informer reports its list's error.
//
// A new ns/name stops the previous informer, and one GET serves the apply,
// and every sync until the informer has listed: the informer on the new
// ConfigMap starts only with watch, a while after the sync (watchDelay).
// Its list and watch then do not compete with the apply's download and
// report, and across a fleet a rollout's wave of applies does not open a
// wave of watches at the same moment (docs/performance.md). A change of the
// ConfigMap in between is not lost: the informer's first list shows it and
// queues the node.
//
// That GET is answered from the apiserver's watch cache (resourceVersion
// "0"), which does not ask etcd, and the informer's cache may lag behind an
// edit too. fresh skips both caches: a quorum GET, whose answer serves until
// the informer has listed.
func (w *configMapWatch) get(ns, name string, fresh bool) (*corev1.ConfigMap, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.namespace != ns || w.name != name {
		w.stopLocked()
		w.namespace, w.name = ns, name
	}
	synced := w.informer != nil && w.informer.HasSynced()
	if !fresh {
		if synced {
			return w.lister.ConfigMaps(ns).Get(name)
		}
		if w.informer != nil {
			if err := w.listErr.get(); err != nil {
				return nil, &listError{err: err}
			}
		}
		if w.got != nil {
			return w.got.cm, w.got.err
		}
	}
	opts := metav1.GetOptions{}
	if !fresh {
		opts.ResourceVersion = "0"
	}
	ctx, cancel := context.WithTimeout(context.Background(), getTimeout)
	defer cancel()
	cm, err := w.client.ConfigMaps(ns).Get(ctx, name, opts)
	if err == nil || apierrors.IsNotFound(err) {
		if !synced {
			w.got = &getResult{cm: cm, err: err}
		}
		return cm, err
	}
	if fresh {
		return nil, err
	}
	// Any other error (such as Forbidden) is the informer's to report,
	// with its list's own words, once: its error handler queues the node.
	if w.informer == nil {
		if err := w.startLocked(); err != nil {
			return nil, err
		}
	}
	return nil, errNotSynced
}

// watch starts the informer on the ConfigMap get last asked for, when it
// does not run yet, once it is due (watchDelay). It returns how long until
// it is due: the caller syncs again then.
func (w *configMapWatch) watch() (time.Duration, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.informer != nil || w.name == "" {
		return 0, nil
	}
	now := w.clock.Now()
	if w.startAt.IsZero() {
		w.startAt = now.Add(watchDelay + rand.N(watchSpread))
	}
	if wait := w.startAt.Sub(now); wait > 0 {
		return wait, nil
	}
	return 0, w.startLocked()
}

// startLocked starts the informer on w.namespace/w.name.
func (w *configMapWatch) startLocked() error {
	ns, name := w.namespace, w.name
	ctx, cancel := context.WithCancel(context.Background())
	informer := cache.NewSharedIndexInformer(kubeclient.ConfigMapListWatch(w.client, ns, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}), &corev1.ConfigMap{}, 0, cache.Indexers{})
	if _, err := informer.AddEventHandler(w.handler); err != nil {
		cancel()
		return err
	}
	listErr := &lastError{}
	if err := informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		cache.DefaultWatchErrorHandler(ctx, r, err)
		if !informer.HasSynced() {
			listErr.set(err)
			w.enqueue()
		}
	}); err != nil {
		cancel()
		return err
	}
	done := make(chan struct{})
	w.informer, w.lister, w.listErr = informer, corelisters.NewConfigMapLister(informer.GetIndexer()), listErr
	w.cancel, w.done = cancel, done
	go func() {
		defer close(done)
		informer.RunWithContext(ctx)
	}()
	go func() {
		// A ConfigMap that does not exist sends no event: the sync
		// itself queues the node.
		if cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
			w.enqueue()
		}
	}()
	return nil
}

func (w *configMapWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopLocked()
}

func (w *configMapWatch) stopLocked() {
	if w.informer != nil {
		w.cancel()
		<-w.done
	}
	w.informer, w.lister, w.cancel, w.done = nil, nil, nil, nil
	w.namespace, w.name, w.listErr, w.got, w.startAt = "", "", nil, nil, time.Time{}
}
