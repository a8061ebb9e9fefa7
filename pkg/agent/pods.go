package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubectl-dkc/dkc/pkg/kubeclient"
	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
	"github.com/kubectl-dkc/dkc/pkg/nodehealth"
)

// Defaults of the pod checks.
const (
	// DefaultPodReadyTimeout bounds the gate's wait for the pods that were
	// Ready before a restart to be Ready again.
	DefaultPodReadyTimeout = 2 * time.Minute
	// trialCheckInterval is how often a config in trial is checked
	// against its baseline, besides every change of the Node and every
	// pod the kubelet stops.
	trialCheckInterval = 10 * time.Second
	// podGateInterval is the wait between the gate's looks at the pods.
	podGateInterval = 500 * time.Millisecond
	// stoppedMemory is how long a pod seen turning Failed is remembered.
	stoppedMemory = 24 * time.Hour
)

// podView is what the agent knows of the pods bound to its node.
type podView interface {
	// pods lists them; errNotSynced until the first list, a *listError
	// when that list failed.
	pods() ([]*corev1.Pod, error)
	// stoppedSince returns the pods seen turning Failed since t, by UID,
	// with the kubelet's reason and message.
	stoppedSince(t time.Time) map[types.UID]string
}

// podWatch is the podView of an informer on the pods bound to the node (a
// spec.nodeName field selector, which the apiserver's watch cache indexes).
// It keeps only what the checks read, and remembers pods that turned
// Failed, since their owner may delete them right after.
type podWatch struct {
	informer cache.SharedIndexInformer
	listErr  *lastError
	clock    clock.Clock

	mu      sync.Mutex
	stopped map[types.UID]stoppedPod
}

type stoppedPod struct {
	at  time.Time
	why string
}

var _ podView = &podWatch{}

// watchPods starts a podWatch for node until ctx ends; enqueue is called
// when a pod turns Failed, and at the informer's first sync or list error.
func watchPods(ctx context.Context, client kubeclient.Interface, node string, clk clock.Clock, enqueue func()) (*podWatch, error) {
	informer := cache.NewSharedIndexInformer(kubeclient.PodListWatch(client, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
	}), &corev1.Pod{}, 0, cache.Indexers{})
	w := &podWatch{informer: informer, listErr: &lastError{}, clock: clk, stopped: map[types.UID]stoppedPod{}}
	if err := informer.SetTransform(slimPod); err != nil {
		return nil, err
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*corev1.Pod)
			p, ok2 := newObj.(*corev1.Pod)
			if ok1 && ok2 && p.Status.Phase == corev1.PodFailed && old.Status.Phase != corev1.PodFailed {
				w.remember(p)
				enqueue()
			}
		},
	}); err != nil {
		return nil, err
	}
	if err := informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		cache.DefaultWatchErrorHandler(ctx, r, err)
		if !informer.HasSynced() {
			w.listErr.set(err)
			enqueue()
		}
	}); err != nil {
		return nil, err
	}
	go informer.RunWithContext(ctx)
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
			enqueue()
		}
	}()
	return w, nil
}

// slimPod keeps of a pod what the checks read: its identity, deletion,
// its readiness probes' period and timeout, the declared features it relies
// on (kubeletconfig.PodFeatures, held in the annotation podFeaturesKey of
// the agent's copy), phase, reason and conditions. A node's pods then cost
// the agent a few hundred bytes each.
func slimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	var containers []corev1.Container
	for _, c := range p.Spec.Containers {
		if r := c.ReadinessProbe; r != nil {
			containers = append(containers, corev1.Container{Name: c.Name,
				ReadinessProbe: &corev1.Probe{PeriodSeconds: r.PeriodSeconds, TimeoutSeconds: r.TimeoutSeconds}})
		}
	}
	var annotations map[string]string
	if fs := kubeletconfig.PodFeatures(p); len(fs) > 0 {
		annotations = map[string]string{podFeaturesKey: strings.Join(fs, ",")}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.Namespace, Name: p.Name, UID: p.UID,
			ResourceVersion: p.ResourceVersion, DeletionTimestamp: p.DeletionTimestamp,
			Annotations: annotations,
		},
		Spec: corev1.PodSpec{Containers: containers},
		Status: corev1.PodStatus{
			Phase: p.Status.Phase, Reason: p.Status.Reason, Message: p.Status.Message,
			Conditions: p.Status.Conditions,
		},
	}, nil
}

// podFeaturesKey holds, in the agent's slim copy of a pod only, the
// declared features the pod relies on, comma-separated. No pod in the API
// carries it.
const podFeaturesKey = "kubectl-dkc.io/agent-pod-features"

// podFeatures returns, by namespace/name, the declared features each of
// pods (slim copies) that is not terminal relies on.
func podFeatures(pods []*corev1.Pod) map[string][]string {
	return kubeletconfig.RunningPodFeatures(pods, func(p *corev1.Pod) []string {
		if v := p.Annotations[podFeaturesKey]; v != "" {
			return strings.Split(v, ",")
		}
		return nil
	})
}

func (w *podWatch) remember(p *corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Now()
	for uid, s := range w.stopped {
		if now.Sub(s.at) > stoppedMemory {
			delete(w.stopped, uid)
		}
	}
	w.stopped[p.UID] = stoppedPod{at: now, why: nodehealth.StopReason(p)}
}

func (w *podWatch) stoppedSince(t time.Time) map[types.UID]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[types.UID]string{}
	for uid, s := range w.stopped {
		if !s.at.Before(t) {
			out[uid] = s.why
		}
	}
	return out
}

func (w *podWatch) pods() ([]*corev1.Pod, error) {
	if !w.informer.HasSynced() {
		if err := w.listErr.get(); err != nil {
			return nil, &listError{err: err}
		}
		return nil, errNotSynced
	}
	var out []*corev1.Pod
	for _, o := range w.informer.GetStore().List() {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// nodePods returns the pods bound to the node, for a check that needs them:
// errNotSynced until the agent has listed them, a *configError (reported,
// and retried with backoff) when it cannot.
func (a *Agent) nodePods() ([]*corev1.Pod, error) {
	if a.podView == nil {
		return nil, &configError{reason: ReasonFailed, msg: "agent: no view of the node's pods"}
	}
	pods, err := a.podView.pods()
	var lerr *listError
	if errors.As(err, &lerr) {
		return nil, &configError{reason: ReasonFailed, msg: fmt.Sprintf(
			"cannot list the pods bound to the node, which the health gate holds to their state before the restart; the agent needs list and watch on pods (docs/security.md): %s", lerr.detail())}
	}
	return pods, err
}

// awaitPods is the health gate's last step, after the kubelet's own checks
// passed on a kubelet restarted at restarted: it waits up to PodReadyTimeout
// until the node is fine by base (the pods that were Ready are Ready again,
// and on kubelets that reset readiness, probed again), and fails at once when a pod was
// stopped or a pressure condition turned True. The Node and the pods are
// the agent's informers' view at each look but the last, which reads the
// Node from the apiserver. If that look could not read the Node or the
// pods, the gate passes on the kubelet's checks alone, and the log says
// so: the apiserver being away does not roll a kubelet back.
func (a *Agent) awaitPods(ctx context.Context, base *nodehealth.Baseline, restarted time.Time) error {
	if base == nil {
		return nil
	}
	logger := klog.FromContext(ctx)
	began := a.Clock.Now()
	defer func() { a.Metrics.PhaseDuration.WithLabelValues(PhasePods).Observe(a.Clock.Since(began).Seconds()) }()
	var waiting string
	for {
		// The last look, whose verdict rolls back, reads the Node from
		// the apiserver: an answer shows that the apiserver is there, where
		// the informer's view would stand still in an outage.
		last := a.Clock.Since(began) >= a.PodReadyTimeout
		var unreadable error
		node, err := a.getNode(ctx, last)
		if err != nil {
			unreadable = fmt.Errorf("read node: %w", err)
		}
		pods, err := a.podView.pods()
		if err != nil {
			unreadable = fmt.Errorf("list pods: %w", err)
		}
		if unreadable == nil {
			v := nodehealth.Judge(*base, nodehealth.Observed{Node: node, Pods: pods, Stopped: a.podView.stoppedSince(base.Taken), Now: a.Clock.Now(), Restarted: restarted, Up: began}, nodehealth.Gate)
			if v.Failed != "" {
				return fmt.Errorf("health gate: %s", v.Failed)
			}
			if v.OK() {
				logger.V(2).Info("The node's pods are as before the restart", "readyPods", base.ReadyPods(), "waited", a.Clock.Since(began))
				return nil
			}
			waiting = v.Waiting
		}
		if last {
			if unreadable != nil {
				logger.Info("Health gate passed without its pod checks: the apiserver did not answer", "err", unreadable)
				return nil
			}
			return fmt.Errorf("health gate: after %s: %s", a.PodReadyTimeout, waiting)
		}
		t := a.Clock.NewTimer(podGateInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
	}
}

// getNode is the Node as Run's informer has it, which its watch keeps up
// to date without a request; read from the apiserver when fresh, or
// outside Run.
func (a *Agent) getNode(ctx context.Context, fresh bool) (*corev1.Node, error) {
	if a.nodes != nil && !fresh {
		return a.nodes.Get(a.NodeName)
	}
	ctx, cancel := context.WithTimeout(ctx, getTimeout)
	defer cancel()
	return a.Client.Nodes().Get(ctx, a.NodeName, metav1.GetOptions{})
}

// checkTrial holds the node, during a trial, to base: the Node as the
// informer has it, the pods, and the node's Lease, read from the
// apiserver's cache. It returns why the trial failed, or nil. What it
// cannot read it does not judge.
func (a *Agent) checkTrial(ctx context.Context, node *corev1.Node, base *nodehealth.Baseline) error {
	if base == nil {
		return nil
	}
	pods, err := a.podView.pods()
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Trial check without pods: not listed", "err", err)
		// Without the list only what the watch saw stop is judged: Judge
		// takes a pod it is not shown as deleted.
		pods = nil
	}
	obs := nodehealth.Observed{Node: node, Pods: pods, Stopped: a.podView.stoppedSince(base.Taken), Now: a.Clock.Now(),
		Grace: a.nodeMonitorGrace()}
	if renewed := a.leaseRenewed; !renewed.IsZero() && obs.Now.Before(renewed.Add(obs.Grace-trialCheckInterval)) {
		// A Lease renewed then cannot turn stale before then plus the
		// grace period: read it again only within a check of that.
		obs.LeaseRenewed = renewed
	} else {
		lctx, cancel := context.WithTimeout(ctx, getTimeout)
		defer cancel()
		// From the apiserver's watch cache (resourceVersion 0), not a
		// quorum read from etcd: a cache milliseconds behind changes
		// nothing against a grace period of tens of seconds.
		if lease, err := a.Client.Leases(corev1.NamespaceNodeLease).Get(lctx, a.NodeName, metav1.GetOptions{ResourceVersion: "0"}); err != nil {
			klog.FromContext(ctx).V(2).Info("Trial check without the node's Lease", "err", err)
		} else if lease.Spec.RenewTime != nil {
			obs.LeaseRenewed = lease.Spec.RenewTime.Time
			a.leaseRenewed = obs.LeaseRenewed
		}
	}
	if v := nodehealth.Judge(*base, obs, nodehealth.Trial); v.Failed != "" {
		return fmt.Errorf("trial: %s", v.Failed)
	}
	return nil
}
