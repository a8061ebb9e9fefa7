package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubectl-dkc/dkc/pkg/apis/dkc/v1alpha1"
	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
	"github.com/kubectl-dkc/dkc/pkg/lease"
	"github.com/kubectl-dkc/dkc/pkg/status"
)

// DefaultResync is how often Run looks at the rollout when no event came.
const DefaultResync = 10 * time.Second

// DefaultParallel is how many nodes Run starts (drains and assigns) at
// once by default. The budget bounds how many are under way in all; this
// only bounds the requests in flight, so that a wave of 100 starts in a
// fraction of a second rather than one node after another. All of a wave
// of 100 at once was measured slower, not faster: the apiserver then
// serves them all together and the wave's agents start together
// (docs/performance.md, "A rollout over 1000 simulated nodes").
const DefaultParallel = 32

var (
	// ErrHalted means the rollout halted on a node's error. It matches
	// status.ErrConfigError, so a command exits with status.ExitConfigError.
	ErrHalted error = haltedError{}
	// ErrPaused means the rollout is paused; `rollout resume` continues it.
	ErrPaused = errors.New("rollout paused")
	// ErrAborted means the operator aborted the rollout.
	ErrAborted = errors.New("rollout aborted")
)

type haltedError struct{}

func (haltedError) Error() string        { return "halted" }
func (haltedError) Is(target error) bool { return target == status.ErrConfigError }

// Options tune Run. The zero value works.
type Options struct {
	// Clock defaults to the real clock; tests step a fake one.
	Clock clock.WithTicker
	// Resync is how often the rollout is looked at without an event
	// (DefaultResync when 0). Progress is driven by watch events; the
	// resync only catches what a broken watch missed.
	Resync time.Duration
	// Drainer drains nodes in Spec.Drain; nil means a KubeDrainer with the
	// rollout's DrainOptions.
	Drainer Drainer
	// OnChange, when set, receives the rollout and its nodes' observations
	// after every pass that changed something. It runs on Run's goroutine.
	OnChange func(r *Rollout, observed map[string]Observed)
	// Log receives a line per pod a drain evicts; nil discards them.
	Log io.Writer
	// Parallel is how many nodes of a wave are drained and assigned at
	// once (DefaultParallel when 0). Never more than the budget are under
	// way, whatever it is.
	Parallel int
	// ReadOnly watches without acting: each node's phase is computed from
	// its carrier and passed to OnChange, nothing is written, and Run
	// returns once the rollout is Done, Halted or Aborted. This is
	// `rollout status -w`.
	ReadOnly bool
	// Nodes, when set, is a synced informer on every Node that Run shares
	// with its host's other engines (the controller's), instead of one of
	// its own on the rollout's selector: one watch and one cache of the
	// nodes for every rollout the host drives.
	Nodes cache.SharedIndexInformer
	// Rollouts, when set, is a synced informer on the rollouts of the
	// store's namespace that Run shares with its host (the controller's),
	// instead of one of its own on the rollout: one watch, and one decode
	// of each version of the rollout, for the host and the engine.
	Rollouts cache.SharedIndexInformer
	// StatusInterval bounds how often the driver writes the rollout only
	// because its counts changed (DefaultStatusInterval when 0); a change
	// of state, wave or soak is written at once.
	StatusInterval time.Duration
	// Identity names this driver in the rollout's Lease (LeaseName);
	// the host name and process ID when empty.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod time the rollout's
	// Lease (lease.Election); zero means lease's defaults.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// AlertInterval is how often, at most, the driver asks the
	// Alertmanager of spec.pauseOnAlerts (DefaultAlertInterval when 0).
	AlertInterval time.Duration
	// RestrictAlertmanagers lets the driver ask only the Alertmanagers of
	// Alertmanagers (the controller's --alertmanager-url): a rollout that
	// names another starts no node, with reason AlertmanagerNotAllowed.
	// Unset, it asks the one the rollout names (the CLI, with its
	// operator's own reach).
	RestrictAlertmanagers bool
	Alertmanagers         []string
	// HTTPClient asks the Alertmanager; http.DefaultClient when nil.
	HTTPClient *http.Client
}

// DefaultStatusInterval is Options.StatusInterval's default.
const DefaultStatusInterval = 5 * time.Second

// LeaseName is the name of the Lease, in the rollout's namespace, that
// fences the driver of rollout name: one driver at a time.
func LeaseName(name string) string {
	const prefix = "nodeconfigrollout-"
	if len(prefix)+len(name) <= validation.DNS1123SubdomainMaxLength {
		return prefix + name
	}
	sum := sha256.Sum256([]byte(name))
	tail := "-" + hex.EncodeToString(sum[:])[:10]
	return prefix + strings.TrimRight(name[:validation.DNS1123SubdomainMaxLength-len(prefix)-len(tail)], ".-") + tail
}

// Run drives the rollout name of store until it is done, halted, aborted or
// paused, or ctx ends. It watches the rollout's nodes and its object, and
// acts on every change: it records each node's phase, starts the nodes the
// current wave and the budget allow, and halts on the first node error.
//
// One driver acts at a time: the holder of the rollout's Lease
// (LeaseName). Run waits for it, following the rollout meanwhile (as
// ReadOnly), and takes over when its holder stops renewing it; each node's
// part is on the node (Mark), so any driver picks the rollout up where
// another left it.
//
// Run returns the rollout as last read, and nil when it is Done, an error
// matching ErrHalted, ErrAborted or ErrPaused, or ctx's error.
func Run(ctx context.Context, client kubernetes.Interface, store *Store, name string, opts Options) (*Rollout, error) {
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
	r, err := store.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	e := &engine{client: client, store: store, opts: opts, cur: r, rv: r.ResourceVersion, kick: make(chan struct{}, 1),
		assigned: map[string]bool{}, marks: map[string]*Mark{},
		alerts: alertPoller{client: opts.HTTPClient, interval: opts.AlertInterval, restrict: opts.RestrictAlertmanagers, allowed: opts.Alertmanagers}}
	if e.opts.Drainer == nil {
		e.opts.Drainer = &KubeDrainer{Client: client, Options: DrainOptions{
			Timeout:            r.Spec.DrainOptions.Timeout.Duration,
			Force:              r.Spec.DrainOptions.Force,
			DeleteEmptyDirData: r.Spec.DrainOptions.DeleteEmptyDirData,
			GracePeriodSeconds: -1,
		}, Out: opts.Log}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := e.startInformers(ctx); err != nil {
		return e.cur, err
	}
	if !opts.ReadOnly {
		done := e.elect(ctx)
		defer func() { cancel(); <-done }()
	}
	return e.loop(ctx)
}

// elect runs the election for the rollout's Lease until ctx ends, again
// after each loss: while this client holds it, leading returns the
// context of its tenure. The returned channel closes when it stopped.
func (e *engine) elect(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	el := &lease.Election{
		Client: e.client, Namespace: e.store.Namespace, Name: LeaseName(e.cur.Name), Identity: e.opts.Identity,
		LeaseDuration: e.opts.LeaseDuration, RenewDeadline: e.opts.RenewDeadline, RetryPeriod: e.opts.RetryPeriod,
	}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			err := el.Run(ctx, func(tenure context.Context) {
				e.setLead(tenure)
				e.poke()
				<-tenure.Done()
				e.setLead(nil)
				e.poke()
			})
			if err != nil && ctx.Err() == nil {
				klog.FromContext(ctx).Info("Rollout lease lost; following until it is free again", "rollout", e.cur.Name, "err", err)
			}
		}
	}()
	return done
}

func (e *engine) setLead(ctx context.Context) {
	e.mu.Lock()
	e.lead = ctx
	e.mu.Unlock()
}

// leading returns the context of this driver's tenure of the rollout's
// Lease, nil when it does not hold it (or follows, ReadOnly).
func (e *engine) leading() context.Context {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lead == nil || e.lead.Err() != nil {
		return nil
	}
	return e.lead
}

// engine is one client driving one rollout.
type engine struct {
	client kubernetes.Interface
	store  *Store
	opts   Options
	cur    *Rollout
	nodes  listerscorev1.NodeLister
	kick   chan struct{}
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
	// draining (start.go).
	drainsLeft atomic.Int32
	// last is the rollout last reported while following.
	last *Rollout
	// alerts asks the Alertmanager of spec.pauseOnAlerts.
	alerts alertPoller

	// mu guards what the informers' handlers and the election share with
	// the loop: the resourceVersion the loop last wrote or read, whether
	// the server holds a different one, the last one the informer
	// delivered, the tenure of the Lease, and the marks written.
	mu    sync.Mutex
	lead  context.Context
	rv    string
	stale bool
	seen  string
}

func (e *engine) poke() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// startInformers watches the rollout's nodes (through its selector when it
// has one) and its object, and pokes the loop on every change.
func (e *engine) startInformers(ctx context.Context) error {
	targets := map[string]bool{}
	for _, n := range e.cur.Spec.Nodes {
		targets[n] = true
	}
	onNode := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok && len(targets) > 0 && !targets[n.Name] {
			return
		}
		e.poke()
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    onNode,
		UpdateFunc: func(_, obj any) { onNode(obj) },
		DeleteFunc: func(any) { e.poke() },
	}
	var nf informers.SharedInformerFactory
	if shared := e.opts.Nodes; shared != nil {
		reg, err := shared.AddEventHandler(handler)
		if err != nil {
			return fmt.Errorf("watch nodes: %w", err)
		}
		context.AfterFunc(ctx, func() { _ = shared.RemoveEventHandler(reg) })
		e.nodes = listerscorev1.NewNodeLister(shared.GetIndexer())
	} else {
		selector := e.cur.Spec.Selector
		nf = informers.NewSharedInformerFactoryWithOptions(e.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = selector
		}))
		nodeInformer := nf.Core().V1().Nodes()
		if err := nodeInformer.Informer().SetTransform(SlimNode); err != nil {
			return fmt.Errorf("watch nodes: %w", err)
		}
		if _, err := nodeInformer.Informer().AddEventHandler(handler); err != nil {
			return fmt.Errorf("watch nodes: %w", err)
		}
		e.nodes = nodeInformer.Lister()
	}

	name := e.cur.Name
	onRollout := func(obj any) {
		if u, ok := obj.(*unstructured.Unstructured); ok && u.GetName() == name {
			e.delivered(u.GetResourceVersion())
		}
	}
	rolloutHandler := cache.ResourceEventHandlerFuncs{
		AddFunc:    onRollout,
		UpdateFunc: func(_, obj any) { onRollout(obj) },
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err != nil || key == e.store.Namespace+"/"+name {
				e.delivered("")
			}
		},
	}
	var rf dynamicinformer.DynamicSharedInformerFactory
	if shared := e.opts.Rollouts; shared != nil {
		reg, err := shared.AddEventHandler(rolloutHandler)
		if err != nil {
			return fmt.Errorf("watch rollout %q: %w", name, err)
		}
		context.AfterFunc(ctx, func() { _ = shared.RemoveEventHandler(reg) })
	} else {
		rf = dynamicinformer.NewFilteredDynamicSharedInformerFactory(e.store.Client, 0, e.store.Namespace, func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		})
		if _, err := rf.ForResource(Resource).Informer().AddEventHandler(rolloutHandler); err != nil {
			return fmt.Errorf("watch rollout %q: %w", name, err)
		}
		rf.Start(ctx.Done())
	}
	if nf != nil {
		nf.Start(ctx.Done())
		for typ, ok := range nf.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("watch %v: %w", typ, ctx.Err())
			}
		}
	}
	if rf != nil {
		for typ, ok := range rf.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("watch %v: %w", typ, ctx.Err())
			}
		}
	}
	return nil
}

// loop runs a pass on every event, at every resync and when a soak ends.
func (e *engine) loop(ctx context.Context) (*Rollout, error) {
	resync := e.opts.Clock.NewTicker(e.opts.Resync)
	defer resync.Stop()
	e.poke()
	for {
		var soak <-chan time.Time
		var timer clock.Timer
		if !e.wake.IsZero() {
			timer = e.opts.Clock.NewTimer(e.wake.Sub(e.opts.Clock.Now()))
			soak = timer.C()
		}
		select {
		case <-ctx.Done():
			return e.cur, ctx.Err()
		case <-e.kick:
		case <-resync.C():
		case <-soak:
		}
		if timer != nil {
			timer.Stop()
		}
		finished, err := e.pass(ctx)
		if finished || err != nil {
			return e.cur, err
		}
	}
}

// isStale reports whether the server holds a version of the rollout other
// than the one the loop last read or wrote.
func (e *engine) isStale() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stale
}

// refresh reads the rollout again when the server holds a newer version.
func (e *engine) refresh(ctx context.Context) error {
	e.mu.Lock()
	stale := e.stale
	e.stale = false
	e.mu.Unlock()
	if !stale {
		return nil
	}
	r, err := e.store.Get(ctx, e.cur.Name)
	if err != nil {
		return err
	}
	e.setCurrent(r)
	return nil
}

func (e *engine) setCurrent(r *Rollout) {
	e.cur = r
	e.mu.Lock()
	e.rv = r.ResourceVersion
	e.mu.Unlock()
}

// delivered records that the rollout's informer delivered version rv of
// it ("" when deleted), and pokes the loop: the server holds a version
// other than the loop's unless rv is the one the loop last wrote or read.
func (e *engine) delivered(rv string) {
	e.mu.Lock()
	if rv == "" || rv != e.rv {
		e.stale = true
	}
	e.seen = rv
	e.mu.Unlock()
	e.poke()
}

// wrote records r, which this client just wrote. The watch often delivers
// the write before its response arrives, and the handler then took it for
// another client's: unless the informer has delivered a later version
// since, the loop's copy is current, and the next pass need not read the
// rollout again. (A later version of another client's would have made the
// write fail with a conflict instead.)
func (e *engine) wrote(r *Rollout) {
	e.cur = r
	e.mu.Lock()
	e.rv = r.ResourceVersion
	if e.seen == r.ResourceVersion {
		e.stale = false
	}
	e.mu.Unlock()
}

// write stores r. It reports false, and marks the rollout stale, when
// another client wrote it first: the pass is then redone on fresh state.
func (e *engine) write(ctx context.Context, r *Rollout) (bool, error) {
	r = r.DeepCopy()
	if !Lists(e.cur) {
		// r's nodes were resolved (Resolve): the object does not hold them.
		r.Spec = *e.cur.Spec.DeepCopy()
	}
	bound(r)
	got, err := e.store.UpdateStatus(ctx, r)
	if errors.Is(err, ErrConflict) {
		e.mu.Lock()
		e.stale = true
		e.mu.Unlock()
		e.poke()
		return false, nil
	}
	if err != nil {
		return false, err
	}
	e.wrote(got)
	e.written = e.opts.Clock.Now()
	return true, nil
}

// bound cuts r's reason and its failures' errors to MaxMessageBytes: what
// the nodes report does not grow the object.
func bound(r *Rollout) {
	r.Status.Reason = kubeletconfig.Shorten(r.Status.Reason, v1alpha1.MaxMessageBytes)
	for i := range r.Status.Failures {
		r.Status.Failures[i].Error = kubeletconfig.Shorten(r.Status.Failures[i].Error, v1alpha1.MaxMessageBytes)
	}
}

// StateError is the error that driving or following r ends with, given its
// state: it halted on a node's error (ErrHalted), was aborted (ErrAborted)
// or paused (ErrPaused); nil when it runs or is done.
func StateError(r *Rollout) error {
	switch r.State() {
	case Halted:
		return fmt.Errorf("rollout %q %w: %s", r.Name, ErrHalted, r.Status.Reason)
	case Aborted:
		return fmt.Errorf("rollout %q: %w", r.Name, ErrAborted)
	case Paused:
		return fmt.Errorf("rollout %q: %w: continue it with kubectl dkc rollout resume %s", r.Name, ErrPaused, r.Name)
	}
	return nil
}
