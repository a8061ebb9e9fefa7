// Restarts that count as disruptions: up to 1.34, a kubelet that restarts
// resets the readiness of its node's pods until their next probe, so every
// Ready pod with a readinessProbe leaves its Services for a while. Before
// the driver assigns a node whose kubelet is that old, it waits, bounded,
// until each PodDisruptionBudget that covers such a pod allows a
// disruption, less the ones that nodes this driver restarted and that are
// not back yet claim. From 1.35 on the kubelet keeps the readiness its
// pods had, and the driver does not wait.

package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-dkc/dkc/pkg/nodehealth"
)

// budgetPoll is how often the driver looks at the budgets it waits for.
var budgetPoll = 2 * time.Second

// ProbedReady reports whether pod is one that a 1.34 kubelet's restart
// takes out of its Services: not finished or deleted, Ready, and with a
// readinessProbe on one of its containers (a restartable init container
// included).
func ProbedReady(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if !nodehealth.PodReady(pod) {
		return false
	}
	probed := func(c corev1.Container) bool { return c.ReadinessProbe != nil }
	return slices.ContainsFunc(pod.Spec.Containers, probed) || slices.ContainsFunc(pod.Spec.InitContainers, probed)
}

// BudgetCovers reports whether pdb covers pod: same namespace, and its selector
// matches the pod's labels (in policy/v1 an empty selector matches every
// pod of the namespace, a missing one none).
func BudgetCovers(pdb *policyv1.PodDisruptionBudget, pod *corev1.Pod) bool {
	if pdb.Namespace != pod.Namespace || pdb.Spec.Selector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	return err == nil && sel.Matches(labels.Set(pod.Labels))
}

// RestartWait is what a kubelet restart waits for: the first probed pod
// whose budget allows no disruption now, and that budget.
type RestartWait struct {
	// Pod and PDB are namespace/name; empty when nothing blocks.
	Pod, PDB string
}

func (w RestartWait) String() string {
	return fmt.Sprintf("waiting for PodDisruptionBudget %s (pod %s) before restarting the kubelet", w.PDB, w.Pod)
}

// RestartBudgets works out whether a restart of the kubelet that runs pods
// may go ahead: it returns what it waits for (the zero RestartWait when
// nothing), and the budgets (namespace/name) that cover the node's probed
// Ready pods, which the restart then claims. A budget allows the restart
// when its status is current (observedGeneration) and it allows a
// disruption beyond the ones claimed (by budget) by other nodes' restarts.
// Pods and budgets are taken in namespace/name order.
func RestartBudgets(pods []corev1.Pod, pdbs []policyv1.PodDisruptionBudget, claimed map[string]int) (RestartWait, []string) {
	pods = slices.Clone(pods)
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return compareKeys(&a.ObjectMeta, &b.ObjectMeta) })
	pdbs = slices.Clone(pdbs)
	slices.SortFunc(pdbs, func(a, b policyv1.PodDisruptionBudget) int { return compareKeys(&a.ObjectMeta, &b.ObjectMeta) })
	var (
		wait   RestartWait
		covers []string
	)
	for i := range pods {
		pod := &pods[i]
		if !ProbedReady(pod) {
			continue
		}
		for j := range pdbs {
			pdb := &pdbs[j]
			if !BudgetCovers(pdb, pod) {
				continue
			}
			key := pdb.Namespace + "/" + pdb.Name
			if !slices.Contains(covers, key) {
				covers = append(covers, key)
			}
			current := pdb.Status.ObservedGeneration >= pdb.Generation
			if wait.Pod == "" && (!current || pdb.Status.DisruptionsAllowed-int32(claimed[key]) < 1) {
				wait = RestartWait{Pod: pod.Namespace + "/" + pod.Name, PDB: key}
			}
		}
	}
	if wait.Pod != "" {
		return wait, nil
	}
	slices.Sort(covers)
	return RestartWait{}, covers
}

func compareKeys(a, b *metav1.ObjectMeta) int {
	if a.Namespace != b.Namespace {
		if a.Namespace < b.Namespace {
			return -1
		}
		return 1
	}
	switch {
	case a.Name < b.Name:
		return -1
	case a.Name > b.Name:
		return 1
	}
	return 0
}

// claims are the budgets that the kubelet restarts this driver let go
// ahead count against, by node, until the node is back: running its
// target and Ready. The disruption controller sees a restart only once the
// pods turn unready, after the pass that assigned the node.
type claims struct {
	mu     sync.Mutex
	byNode map[string][]string
}

// RestartTimeout bounds how long a node waits for its budgets before its
// kubelet restarts: the rollout's drain timeout, DefaultDrainTimeout when
// it has none.
func RestartTimeout(r *Rollout) time.Duration {
	if t := r.Spec.DrainOptions.Timeout.Duration; t > 0 {
		return t
	}
	return DefaultDrainTimeout
}

// waitForBudgets returns once a restart of the kubelet of the node named
// name (node, as last seen; nil: read it) may go ahead (RestartBudgets),
// having claimed the budgets it counts against; at once when the kubelet
// is 1.35 or newer. While it waits it says so in status (notice.go). It
// fails when the wait outlasts RestartTimeout.
func (e *engine) waitForBudgets(ctx context.Context, r *Rollout, name string, node *corev1.Node) error {
	if node == nil {
		n, err := e.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("read node %q: %w", name, err)
		}
		node = n
	}
	if !nodehealth.ResetsReadiness(node) {
		return nil
	}
	timeout := RestartTimeout(r)
	var waiting RestartWait
	// The requests run under ctx, not under the poll's bound: one that the
	// bound would cut short (client-go's rate limiter refuses to wait past
	// a deadline) would halt the rollout with its own error instead.
	err := wait.PollUntilContextTimeout(ctx, budgetPoll, timeout, true, func(context.Context) (bool, error) {
		pods, err := e.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String(),
		})
		if err != nil {
			return false, fmt.Errorf("list the pods of node %q: %w", name, err)
		}
		pods.Items = slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.Spec.NodeName != name })
		if !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return ProbedReady(&p) }) {
			return true, nil
		}
		pdbs, err := e.client.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, fmt.Errorf("list PodDisruptionBudgets: %w", err)
		}
		e.claims.mu.Lock()
		w, covers := RestartBudgets(pods.Items, pdbs.Items, e.claimedByOthers(r, name))
		if w.Pod == "" && len(covers) > 0 {
			if e.claims.byNode == nil {
				e.claims.byNode = map[string][]string{}
			}
			e.claims.byNode[name] = covers
		}
		e.claims.mu.Unlock()
		if w.Pod != "" {
			waiting = w
			e.note(ctx, name, w.String())
			return false, nil
		}
		return true, nil
	})
	e.note(ctx, name, "")
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && waiting.Pod != "" {
		return fmt.Errorf("wait for PodDisruptionBudget %s (pod %s) before restarting the kubelet: it allowed no disruption within %s; the node keeps its config", waiting.PDB, waiting.Pod, timeout)
	}
	return err
}

// claimedByOthers counts, by budget, the claims of the nodes other than
// name whose restart is not over, and forgets the others. The caller holds
// e.claims.mu.
func (e *engine) claimedByOthers(r *Rollout, name string) map[string]int {
	counts := map[string]int{}
	for n, covers := range e.claims.byNode {
		if n == name || e.backFromRestart(r, n) {
			delete(e.claims.byNode, n)
			continue
		}
		for _, key := range covers {
			counts[key]++
		}
	}
	return counts
}

// backFromRestart reports whether the node named name is, in the node
// cache, Ready and running its target, or gone.
func (e *engine) backFromRestart(r *Rollout, name string) bool {
	if e.nodes == nil {
		return false
	}
	node, err := e.getNode(name)
	if err != nil {
		return false
	}
	if node == nil {
		return true
	}
	target, pin := r.Spec.Target(name)
	o, err := Observe(node, target, pin)
	return err == nil && o.Running && o.Ready
}
