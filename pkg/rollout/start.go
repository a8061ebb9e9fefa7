// Starting nodes: mark the node (Mark) in the patch that assigns it its
// target, or, for a node to drain, in the patch that cordons it, then drain
// and assign; each patch is conditional on the Node still holding the
// assignment the rollout recorded for it (assignOver). The driver holds the
// rollout's Lease, and counts the nodes it marked against the budget
// before the node cache shows them, so the budget holds however many start
// at once.

package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// startNodes marks, drains (where the rollout must) and assigns the nodes
// in names, up to Options.Parallel at once, in their order, as r records
// them; fresh lists the ones this pass started, whose marks are still to
// be written. On the first failure no further node is started; the ones
// under way finish. Nor is one started once a node in progress has failed
// meanwhile, or the rollout was paused, aborted or deleted (interrupted):
// drains make a pass long, and the next pass decides on what changed.
// startNodes returns the first node that failed to start and its error.
func (e *engine) startNodes(ctx context.Context, r *Rollout, fresh, names []string, nodes map[string]*corev1.Node) (string, error) {
	if len(names) == 0 {
		return "", nil
	}
	var (
		mu       sync.Mutex
		failed   string
		firstErr error
		wg       sync.WaitGroup
	)
	drains := int32(0)
	for _, name := range names {
		if r.NodeStatus(name).Cordoned {
			drains++
		}
	}
	e.drainsLeft.Store(drains)
	defer e.drainsLeft.Store(0)
	e.inProgress = nil
	for _, name := range r.Spec.Nodes {
		if r.NodeStatus(name).Phase == InProgress {
			e.inProgress = append(e.inProgress, name)
		}
	}
	next := make(chan string)
	for range min(e.opts.Parallel, len(names)) {
		wg.Go(func() {
			for name := range next {
				cordoned := r.NodeStatus(name).Cordoned
				mu.Lock()
				halted := firstErr != nil
				mu.Unlock()
				if halted || ctx.Err() != nil || e.interrupted(r) {
					if cordoned {
						e.drainsLeft.Add(-1)
					}
					continue
				}
				if cordoned {
					e.drainsInFlight.Add(1)
				}
				var once sync.Once
				drained := func() {
					if cordoned {
						once.Do(func() {
							e.drainsLeft.Add(-1)
							e.drainsInFlight.Add(-1)
						})
					}
				}
				err := e.startNode(ctx, r, name, slices.Contains(fresh, name), nodes[name], drained)
				drained()
				mu.Lock()
				if err != nil && firstErr == nil {
					failed, firstErr = name, err
				}
				if err == nil {
					// The node cache may not show the assignment on the
					// next pass yet.
					e.assigned[name] = true
				}
				mu.Unlock()
			}
		})
	}
	for _, name := range names {
		next <- name
	}
	close(next)
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		return "", ctx.Err()
	}
	return failed, firstErr
}

// startNode marks the node named name when fresh, drains it when the
// rollout must (and then calls drained), waits for the
// PodDisruptionBudgets that a restart of its kubelet counts against
// (pdb.go), then assigns it its target. A failed drain or wait uncordons
// the node again (release): nothing changed on it but its mark, which
// still asks for the drain, so that whoever starts it next drains it
// first.
func (e *engine) startNode(ctx context.Context, r *Rollout, name string, fresh bool, node *corev1.Node, drained func()) error {
	rec := r.NodeStatus(name)
	logger := klog.FromContext(ctx).WithValues("node", name, "rollout", r.Name)
	target, pin := r.Spec.Target(name)
	var mark *Mark
	if fresh {
		mark = newMark(r, name, rec.Previous, rec.PreviousPin, rec.Cordoned, *rec.Started)
		e.setMark(name, mark)
	}
	if rec.Cordoned {
		if mark != nil {
			written := *mark
			if err := patchOver(ctx, e.client, name, node, rec.Previous, func(node *corev1.Node) ([]byte, error) {
				// Whether it was cordoned before, as the Node
				// patched shows it (cordonedBefore).
				written.KeepCordoned = cordonedBefore(node)
				return markPatchAt(nil, &written, ptr.To(true), node.ResourceVersion)
			}); err != nil {
				e.setMark(name, nil)
				return fmt.Errorf("cordon node %q: %w", name, err)
			}
			e.setMark(name, &written)
			mark = nil
		}
		logger.V(2).Info("Draining node")
		err := e.opts.Drainer.Drain(ctx, name, func(b Blocked) {
			if b.Pod == "" {
				e.note(ctx, name, "")
				return
			}
			e.note(ctx, name, "draining: "+b.String())
		})
		e.note(ctx, name, "")
		drained()
		if err != nil {
			if uerr := e.release(ctx, r, name); uerr != nil {
				logger.Error(uerr, "Uncordon after a failed drain")
			}
			return err
		}
		node = nil // the drain changed it: read it again
	}
	if err := e.waitForBudgets(ctx, r, name, node); err != nil {
		if rec.Cordoned {
			if uerr := e.release(ctx, r, name); uerr != nil {
				logger.Error(uerr, "Uncordon after the wait for PodDisruptionBudgets failed")
			}
		} else if mark != nil {
			e.setMark(name, nil)
		}
		return err
	}
	carrier := source.Annotation
	if target != nil {
		c, err := e.carriers.get(ctx, e.client, name, node)
		if err != nil {
			return err
		}
		carrier = c
	}
	logger.V(2).Info("Assigning node", "target", DescribeTarget(target), "carrier", carrier)
	err := patchOver(ctx, e.client, name, node, rec.Previous, func(node *corev1.Node) ([]byte, error) {
		if source.Holds(node, target, pin) {
			return nil, nil // another driver assigned it
		}
		patch, err := source.AssignPatchAt(carrier, target, pin, node.ResourceVersion)
		if err != nil {
			return nil, err
		}
		return markPatch(patch, mark, nil)
	})
	if err != nil && mark != nil {
		e.setMark(name, nil)
	}
	if err == nil && rec.Cordoned {
		e.uncordonOnceBack(ctx, r, name)
	}
	return err
}

// cordonedBefore reports whether node was unschedulable before any rollout
// cordoned it: it is unschedulable, and not by the cordon that an earlier
// rollout made and left (a rollout that halted or was aborted with the node
// drained), which that rollout's mark records (Cordoned, and not
// KeepCordoned). The rollout that drains it next, such as the earlier
// one's undo, then uncordons it once it is back.
func cordonedBefore(node *corev1.Node) bool {
	if !node.Spec.Unschedulable {
		return false
	}
	m, err := MarkOf(node)
	if err != nil || m == nil {
		return true
	}
	return !m.Cordoned || m.KeepCordoned
}

// backPoll is how often uncordonOnceBack looks at the node.
var backPoll = time.Second

// interrupted reports whether a node of r in progress when the pass
// decided (e.inProgress; those it starts among them) has failed since, or
// the rollout's informer delivered a version that is paused, aborted or
// deleted: the pass then starts no further node.
func (e *engine) interrupted(r *Rollout) bool {
	e.mu.Lock()
	stop := e.stopAsked
	e.mu.Unlock()
	if stop || e.nodes == nil {
		return stop
	}
	for _, name := range e.inProgress {
		node, err := e.getNode(name)
		if err != nil || node == nil {
			continue
		}
		target, pin := r.Spec.Target(name)
		o, err := e.observe(node, target, pin)
		if err != nil {
			continue // a node that cannot be read: the next pass decides
		}
		if phase, _ := NextPhase(r.NodeStatus(name), o); phase == Failed {
			return true
		}
	}
	return false
}

// backWait bounds how long a drained node that is not back holds its
// worker for the pass's drains still queued (uncordonOnceBack).
var backWait = 5 * time.Minute

// uncordonOnceBack waits, while other nodes of the pass still drain, until
// the node named name, drained and assigned, is back (running its target
// and Ready), and then uncordons it, as the next pass would (decide's
// Uncordon). Their drains may wait for the room it makes: the pods they
// evict can go nowhere else while it is cordoned, and a
// PodDisruptionBudget refuses their evictions until those pods are Ready
// again; the next pass comes only once they are drained. It returns when
// the node is back or fails, or when no other drain is under way and none
// is queued, the pass is interrupted, or backWait has passed: the next
// pass then decides. A queued drain waits for a worker, which a node that
// never comes back must not hold for ever.
func (e *engine) uncordonOnceBack(ctx context.Context, r *Rollout, name string) {
	if e.nodes == nil {
		return
	}
	target, pin := r.Spec.Target(name)
	until := e.opts.Clock.Now().Add(backWait)
	_ = wait.PollUntilContextCancel(ctx, backPoll, true, func(ctx context.Context) (bool, error) {
		if e.drainsInFlight.Load() <= 0 && (e.drainsLeft.Load() <= 0 || e.interrupted(r) || !e.opts.Clock.Now().Before(until)) {
			return true, nil
		}
		node, err := e.getNode(name)
		if err != nil || node == nil {
			return true, nil
		}
		o, err := Observe(node, target, pin)
		switch {
		case err != nil || o.Error != "":
			return true, nil
		case !o.Running || !o.Ready:
			return false, nil
		}
		if err := e.uncordon(ctx, r, name, node); err != nil {
			klog.FromContext(ctx).Error(err, "Uncordon a drained node that is back", "node", name, "rollout", r.Name)
		}
		return true, nil
	})
}

// setMark records mark (nil: none) as written on node by this driver.
func (e *engine) setMark(node string, mark *Mark) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if mark == nil {
		delete(e.marks, node)
		return
	}
	e.marks[node] = mark
}

// release makes the node named name schedulable again after its drain, or
// the wait for its PodDisruptionBudgets, failed, unless it was
// unschedulable before r cordoned it (Mark.KeepCordoned). Its mark is left
// as it is: Cordoned says the node is still to be drained before it is
// assigned, and the Drainer cordons it again first.
func (e *engine) release(ctx context.Context, r *Rollout, name string) error {
	mark, err := e.markFor(ctx, r, name, nil)
	if err != nil {
		return err
	}
	if mark.Owns(r) && mark.KeepCordoned {
		return nil
	}
	return e.schedulable(ctx, name, nil, false)
}

// markFor returns the mark of the node named name, as last seen (node;
// nil: read it), or the one this driver wrote on it when the node does
// not show r's yet.
func (e *engine) markFor(ctx context.Context, r *Rollout, name string, node *corev1.Node) (*Mark, error) {
	if node == nil {
		n, err := e.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("uncordon node %q: %w", name, err)
		}
		node = n
	}
	mark, err := MarkOf(node)
	if err != nil {
		return nil, fmt.Errorf("uncordon node %q: %w", name, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if m := e.marks[name]; !mark.Owns(r) && m != nil {
		mark = m
	}
	return mark, nil
}

// uncordon makes the node named name, which r drained, schedulable again,
// unless it was unschedulable before r cordoned it (Mark.KeepCordoned),
// and clears Cordoned in its mark, in one patch. node is the Node as last
// seen; nil: read it.
func (e *engine) uncordon(ctx context.Context, r *Rollout, name string, node *corev1.Node) error {
	mark, err := e.markFor(ctx, r, name, node)
	if err != nil {
		return err
	}
	keep := false
	if mark.Owns(r) {
		m := *mark
		m.Cordoned, keep = false, m.KeepCordoned
		mark = &m
	} else {
		mark = nil
	}
	return e.schedulable(ctx, name, mark, keep)
}

// schedulable makes the node named name schedulable, unless keep, and, in
// the same patch, writes mark (nil: leaves the node's mark as it is).
func (e *engine) schedulable(ctx context.Context, name string, mark *Mark, keep bool) error {
	unschedulable := ptr.To(false)
	if keep {
		unschedulable = nil
		if mark == nil {
			return nil
		}
	}
	patch, err := markPatch(nil, mark, unschedulable)
	if err != nil {
		return err
	}
	if _, err := e.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: source.FieldManager}); err != nil {
		return fmt.Errorf("uncordon node %q: %w", name, err)
	}
	if mark != nil {
		e.setMark(name, mark)
	}
	return nil
}

// assignRetry bounds assignOver's attempts on a Node that keeps changing.
var assignRetry = retry.DefaultRetry

// patchOver patches the node named name with what patch returns for the
// Node's resourceVersion, provided it still holds previous, the assignment
// the rollout recorded for it when it started it; a patch of nil sends
// nothing. The patch is conditional on the resourceVersion of the Node as
// last seen (node, from the informer; nil: read it first), and on a
// conflict the Node is read again (retry.RetryOnConflict). A node that
// holds anything else was assigned outside the rollout meanwhile (during
// its drain, say): it is left as it is, and its error, the one NextPhase
// gives such a node, halts the rollout.
func patchOver(ctx context.Context, client kubernetes.Interface, name string, node *corev1.Node, previous *corev1.NodeConfigSource, patch func(node *corev1.Node) ([]byte, error)) error {
	err := retry.RetryOnConflict(assignRetry, func() error {
		if node == nil {
			n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("patch node %q: %w", name, err)
			}
			node = n
		}
		p, err := patch(node)
		if err != nil || p == nil {
			return err
		}
		holds, _, err := source.Assigned(node)
		if err != nil {
			return fmt.Errorf("patch node %q: %w", name, err)
		}
		if !source.Equal(holds, previous) {
			return errors.New(changedOutside(holds, previous))
		}
		_, err = client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, p, metav1.PatchOptions{FieldManager: source.FieldManager})
		if apierrors.IsConflict(err) {
			node = nil
		}
		if err != nil {
			return fmt.Errorf("patch node %q: %w", name, err)
		}
		return nil
	})
	if apierrors.IsConflict(err) {
		return fmt.Errorf("patch node %q: the Node changed under each of %d attempts", name, assignRetry.Steps)
	}
	return err
}

// carrierCache remembers the carrier source.Detect found, for one run of
// the engine. The carrier is the apiserver's, not the node's: an apiserver
// keeps spec.configSource or drops it for every Node alike, with one
// exception (DESIGN.md, "Carrier on 1.26+"): on update a 1.26+ apiserver
// keeps the field on a Node that stores one already. So there are two
// answers at most, one for the nodes that hold spec.configSource and one
// for those that do not, and each is detected once, on the first such
// node, instead of once per node (a request each, which at client-go's
// rate limit spread a wave's starts over tens of seconds). A failed Detect
// is not remembered: the next node tries again.
type carrierCache struct {
	mu sync.Mutex
	// byNative is indexed by whether the node holds spec.configSource.
	byNative map[bool]source.Carrier
}

// get returns the carrier for the node named name, which node shows as
// last seen (nil when not seen), detecting it on that node the first time
// its kind of node is asked for. Callers wait for a detection under way.
func (c *carrierCache) get(ctx context.Context, client kubernetes.Interface, name string, node *corev1.Node) (source.Carrier, error) {
	native := node != nil && node.Spec.ConfigSource != nil
	c.mu.Lock()
	defer c.mu.Unlock()
	if carrier, ok := c.byNative[native]; ok {
		return carrier, nil
	}
	carrier, err := source.Detect(ctx, client.CoreV1().Nodes(), name)
	if err != nil {
		return "", err
	}
	if c.byNative == nil {
		c.byNative = map[bool]source.Carrier{}
	}
	c.byNative[native] = carrier
	return carrier, nil
}
