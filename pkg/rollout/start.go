// Starting nodes: drain where the rollout must, then assign the target
// through the carrier, on the condition that the Node still holds the
// assignment the rollout recorded before it (assignOver). A write of the
// rollout records the nodes queued or InProgress before any of them starts
// (execute, in pass.go), so the budget holds however many start at once.

package rollout

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// startNodes drains (where the rollout must) and assigns the nodes in
// names, up to Options.Parallel at once, in their order, as r records
// them. Every one of them is recorded InProgress or queued already, so the
// budget holds however many run at once. On the first failure no further node is started; the ones under
// way finish. startNodes returns the first node that failed and its error.
func (e *engine) startNodes(ctx context.Context, r *Rollout, names []string, nodes map[string]*corev1.Node) (string, error) {
	if len(names) == 0 {
		return "", nil
	}
	var (
		mu       sync.Mutex
		failed   string
		firstErr error
		wg       sync.WaitGroup
	)
	next := make(chan string)
	for range min(e.opts.Parallel, len(names)) {
		wg.Go(func() {
			for name := range next {
				mu.Lock()
				halted := firstErr != nil
				mu.Unlock()
				if halted {
					continue
				}
				err := e.startNode(ctx, r, name, nodes[name])
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
	return failed, firstErr
}

// startNode drains node when the rollout must, then assigns it its target.
// A failed drain uncordons the node again: nothing changed on it.
func (e *engine) startNode(ctx context.Context, r *Rollout, name string, node *corev1.Node) error {
	rec := r.NodeStatus(name)
	logger := klog.FromContext(ctx).WithValues("node", name, "rollout", r.Name)
	if rec.Cordoned {
		logger.V(2).Info("Draining node")
		if err := e.opts.Drainer.Drain(ctx, name); err != nil {
			if uerr := e.opts.Drainer.Uncordon(ctx, name); uerr != nil {
				logger.Error(uerr, "Uncordon after a failed drain")
			}
			return err
		}
	}
	target, pin := r.Spec.Target(name)
	carrier := source.Annotation
	if target != nil {
		c, err := e.carriers.get(ctx, e.client, name, node)
		if err != nil {
			return err
		}
		carrier = c
	}
	logger.V(2).Info("Assigning node", "target", DescribeTarget(target), "carrier", carrier)
	if rec.Cordoned {
		node = nil // the drain changed it: read it again
	}
	return assignOver(ctx, e.client, name, node, carrier, target, pin, rec.Previous)
}

// assignRetry bounds assignOver's attempts on a Node that keeps changing.
var assignRetry = retry.DefaultRetry

// assignOver assigns the node named name its target through carrier,
// provided it still holds previous, the assignment the rollout recorded for
// it when it started it. The patch is conditional on the resourceVersion of
// the Node as last seen (node, from the informer; nil: read it first), and
// on a conflict the Node is read again (retry.RetryOnConflict). A node that
// then holds its target was assigned by another client driving the
// rollout; one that holds anything else was assigned outside the rollout
// meanwhile (during its drain, say): it is left as it is, and its error,
// the one NextPhase gives such a node, halts the rollout.
func assignOver(ctx context.Context, client kubernetes.Interface, name string, node *corev1.Node, carrier source.Carrier, target *corev1.NodeConfigSource, pin *source.Pin, previous *corev1.NodeConfigSource) error {
	err := retry.RetryOnConflict(assignRetry, func() error {
		if node == nil {
			n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("assign node %q: %w", name, err)
			}
			node = n
		}
		holds, _, err := source.Assigned(node)
		if err != nil {
			return fmt.Errorf("assign node %q: %w", name, err)
		}
		switch {
		case source.Holds(node, target, pin):
			return nil // another client driving the rollout assigned it
		case !source.Equal(holds, previous):
			return errors.New(changedOutside(holds, previous))
		}
		err = assignVia(ctx, client, name, carrier, target, pin, node.ResourceVersion)
		if apierrors.IsConflict(err) {
			node = nil
		}
		return err
	})
	if apierrors.IsConflict(err) {
		return fmt.Errorf("assign node %q: the Node changed under each of %d attempts", name, assignRetry.Steps)
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

// assignVia sets node's assignment to target pinned by pin through
// carrier, on the Node at resourceVersion rv only (any version when rv is
// empty); the error wraps the apiserver's Conflict otherwise.
func assignVia(ctx context.Context, client kubernetes.Interface, node string, carrier source.Carrier, target *corev1.NodeConfigSource, pin *source.Pin, rv string) error {
	patch, err := source.AssignPatchAt(carrier, target, pin, rv)
	if err != nil {
		return fmt.Errorf("assign node %q: %w", node, err)
	}
	if _, err := client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: source.FieldManager}); err != nil {
		return fmt.Errorf("assign node %q: %w", node, err)
	}
	return nil
}
