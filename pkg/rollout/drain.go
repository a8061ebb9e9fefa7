package rollout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	policyv1client "k8s.io/client-go/kubernetes/typed/policy/v1"
	"k8s.io/kubectl/pkg/drain"
)

// Drainer empties a node before its kubelet restarts on a config that needs
// it (see NeedsDrain). The driver cordons the node first, in the patch that
// marks it, and uncordons it after the health gate.
type Drainer interface {
	// Drain cordons node, if it is not already, and evicts its pods. While
	// a PodDisruptionBudget refuses an eviction it calls blocked (when not
	// nil) with that eviction, each time the blocked eviction it reports
	// changes, and with the zero Blocked once none is.
	Drain(ctx context.Context, node string, blocked func(Blocked)) error
}

// Blocked is an eviction that a PodDisruptionBudget refuses: the eviction
// API answers 429 while the budget allows no disruption, and the drain
// retries until its timeout.
type Blocked struct {
	// Pod and PDB are namespace/name.
	Pod, PDB string
}

func (b Blocked) String() string {
	return fmt.Sprintf("eviction of pod %s blocked by PodDisruptionBudget %s", b.Pod, b.PDB)
}

// DrainOptions are the knobs of KubeDrainer, named after kubectl drain's
// flags.
type DrainOptions struct {
	// Timeout bounds the eviction of a node's pods; 0 means forever.
	Timeout time.Duration
	// Force evicts pods that no controller manages (kubectl drain --force).
	Force bool
	// DeleteEmptyDirData evicts pods with emptyDir volumes, whose data is
	// lost (kubectl drain --delete-emptydir-data).
	DeleteEmptyDirData bool
	// GracePeriodSeconds overrides the pods' own when not negative.
	GracePeriodSeconds int
}

// KubeDrainer drains with k8s.io/kubectl/pkg/drain, the library of kubectl
// drain: pods leave through the eviction API, so PodDisruptionBudgets hold.
// DaemonSet pods are always left alone: the dkc agent is one of them.
type KubeDrainer struct {
	Client  kubernetes.Interface
	Options DrainOptions
	// Out receives one line per evicted pod; nil discards them.
	Out io.Writer
}

var _ Drainer = &KubeDrainer{}

// evictRetryDelay is how long a drain waits before it asks again for an
// eviction that a PodDisruptionBudget refused: kubectl drain's delay. The
// library's default is none, which asks again at once, as fast as the
// client's rate limit lets it.
var evictRetryDelay = 5 * time.Second

func (d *KubeDrainer) helper(ctx context.Context) *drain.Helper {
	out := d.Out
	if out == nil {
		out = io.Discard
	}
	return &drain.Helper{
		Ctx:                  ctx,
		Client:               d.Client,
		Force:                d.Options.Force,
		GracePeriodSeconds:   d.Options.GracePeriodSeconds,
		IgnoreAllDaemonSets:  true,
		Timeout:              d.Options.Timeout,
		DeleteEmptyDirData:   d.Options.DeleteEmptyDirData,
		EvictErrorRetryDelay: evictRetryDelay,
		Out:                  out,
		ErrOut:               out,
		OnPodDeletedOrEvicted: func(pod *corev1.Pod, usingEviction bool) {
			verb := "deleted"
			if usingEviction {
				verb = "evicted"
			}
			fmt.Fprintf(out, "pod/%s %s from node/%s\n", pod.Name, verb, pod.Spec.NodeName)
		},
	}
}

// Drain cordons node and evicts its pods. A drain that ends (at its
// timeout) while a PodDisruptionBudget refuses an eviction says which.
func (d *KubeDrainer) Drain(ctx context.Context, node string, blocked func(Blocked)) error {
	if err := d.cordon(ctx, node, true); err != nil {
		return err
	}
	refusals := &refusals{report: blocked, byPod: map[string]string{}}
	h := d.helper(ctx)
	h.Client = evictionClient{Interface: d.Client, refusals: refusals}
	if err := drain.RunNodeDrain(h, node); err != nil {
		if b := refusals.first(); b.Pod != "" {
			return fmt.Errorf("drain node %q: %s: %w", node, b, err)
		}
		return fmt.Errorf("drain node %q: %w", node, err)
	}
	return nil
}

// refusals holds the evictions of one drain that a PodDisruptionBudget
// refuses at the moment, and reports the first (by pod) when it changes:
// the drain retries every few seconds, and the same refusal is reported
// once.
type refusals struct {
	report func(Blocked)

	mu       sync.Mutex
	byPod    map[string]string // pod -> PDB
	reported Blocked
}

// record notes the answer err to the eviction of pod ev.
func (r *refusals) record(ev *policyv1.Eviction, err error) {
	pod := ev.Namespace + "/" + ev.Name
	r.mu.Lock()
	defer r.mu.Unlock()
	if pdb := refusedBy(err); pdb != "" {
		r.byPod[pod] = ev.Namespace + "/" + pdb
	} else {
		delete(r.byPod, pod)
	}
	if b := r.firstLocked(); b != r.reported && r.report != nil {
		r.reported = b
		r.report(b)
	}
}

func (r *refusals) first() Blocked {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.firstLocked()
}

func (r *refusals) firstLocked() Blocked {
	if len(r.byPod) == 0 {
		return Blocked{}
	}
	pods := make([]string, 0, len(r.byPod))
	for p := range r.byPod {
		pods = append(pods, p)
	}
	pod := slices.Min(pods)
	return Blocked{Pod: pod, PDB: r.byPod[pod]}
}

// refusedBy returns the name of the PodDisruptionBudget that refused an
// eviction with err, "" when none did. The apiserver names it only in the
// message of the 429's DisruptionBudget cause ("The disruption budget NAME
// needs ..."); a cause that does not parse gives "?".
func refusedBy(err error) string {
	var status apierrors.APIStatus
	if !apierrors.IsTooManyRequests(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return ""
	}
	for _, c := range status.Status().Details.Causes {
		if c.Type != policyv1.DisruptionBudgetCause {
			continue
		}
		if rest, ok := strings.CutPrefix(c.Message, "The disruption budget "); ok {
			if name, _, _ := strings.Cut(rest, " "); name != "" {
				return name
			}
		}
		return "?"
	}
	return ""
}

// evictionClient is a clientset whose policy/v1 evictions report their
// answers to refusals; kubectl's drain library offers no hook for a
// refused eviction but its output.
type evictionClient struct {
	kubernetes.Interface
	refusals *refusals
}

func (c evictionClient) PolicyV1() policyv1client.PolicyV1Interface {
	return evictionPolicy{PolicyV1Interface: c.Interface.PolicyV1(), refusals: c.refusals}
}

type evictionPolicy struct {
	policyv1client.PolicyV1Interface
	refusals *refusals
}

func (p evictionPolicy) Evictions(namespace string) policyv1client.EvictionInterface {
	return evictions{EvictionInterface: p.PolicyV1Interface.Evictions(namespace), refusals: p.refusals}
}

type evictions struct {
	policyv1client.EvictionInterface
	refusals *refusals
}

func (e evictions) Evict(ctx context.Context, ev *policyv1.Eviction) error {
	err := e.EvictionInterface.Evict(ctx, ev)
	e.refusals.record(ev, err)
	return err
}

func (d *KubeDrainer) cordon(ctx context.Context, name string, unschedulable bool) error {
	verb := "cordon"
	if !unschedulable {
		verb = "uncordon"
	}
	node, err := d.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("%s node %q: %w", verb, name, err)
	}
	if err := drain.RunCordonOrUncordon(d.helper(ctx), node, unschedulable); err != nil {
		return fmt.Errorf("%s node %q: %w", verb, name, err)
	}
	return nil
}
