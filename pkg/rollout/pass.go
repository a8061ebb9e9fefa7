package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// pass looks at every node of the rollout once and acts:
//  1. record each node's phase from its carrier (NextPhase);
//  2. halt on the first failed node;
//  3. uncordon drained nodes that passed their health gate;
//  4. finish when every node is done;
//  5. enter the next wave once every earlier node is done and the soak
//     passed;
//  6. start the current wave's nodes while the budget has room: record
//     them InProgress (with the assignment to undo to) first, then drain
//     and assign them, up to Options.Parallel at once.
//
// Recording before assigning is what keeps the budget across a dead
// client: a node recorded InProgress holds its slot, and whoever runs the
// next pass assigns it if the dead client did not. A node is assigned only
// when it does not hold its target, so it is never restarted twice.
func (e *engine) pass(ctx context.Context) (finished bool, err error) {
	if err := e.refresh(ctx); err != nil {
		return true, err
	}
	if !e.opts.ReadOnly {
		if ok, err := e.takeState(ctx); !ok || err != nil {
			return err != nil, err
		}
		if e.cur.Status.State != Running {
			if e.cur.Status.State == Done {
				return true, nil
			}
			return true, stateError(e.cur)
		}
	}
	now := metav1.NewMicroTime(e.opts.Clock.Now())

	// 1. phases
	// Phases that only follow the carrier (Done, Skipped, InProgress seen
	// on a node someone else assigned) are written lazily, with the next
	// write that must happen: any client derives them again from the
	// nodes. What the carrier cannot tell is written before it matters:
	// nodes about to be assigned, waves, soak, cordons and final states.
	r, observed, lazy, err := live(e.cur, func(name string) (*corev1.Node, error) {
		node, err := e.nodes.Get(name)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return node, err
	}, e.observations.observe, now)
	if err != nil {
		return true, err
	}
	nodes := make(map[string]*corev1.Node, len(observed))
	for name := range observed {
		if node, err := e.nodes.Get(name); err == nil {
			nodes[name] = node
		}
	}

	if e.opts.ReadOnly {
		r.Status.State = r.State()
		return e.follow(r, observed)
	}

	eager := false

	// 2. halt
	for _, name := range r.Spec.Nodes {
		if rec := r.NodeStatus(name); rec.Phase == Failed {
			r.Status.State, r.Status.Reason = Halted, haltReason(name, rec.Error)
			return e.finish(ctx, r, observed)
		}
	}

	// 3. uncordon
	for _, name := range r.Spec.Nodes {
		rec := r.NodeStatus(name)
		if !rec.Cordoned || rec.Phase != Succeeded {
			continue
		}
		if err := e.opts.Drainer.Uncordon(ctx, name); err != nil {
			return true, err
		}
		rec.Cordoned = false
		r.Status.Nodes[name] = rec
		eager = true
	}

	// 4. done
	if slices.IndexFunc(r.Spec.Nodes, func(n string) bool {
		rec := r.NodeStatus(n)
		return !rec.Phase.Finished() || rec.Cordoned
	}) < 0 {
		r.Status.State, r.Status.Reason = Done, ""
		return e.finish(ctx, r, observed)
	}

	// 5. waves and soak
	waves := Waves(&r.Spec)
	current := slices.IndexFunc(waves, func(w Wave) bool {
		return slices.ContainsFunc(w.Nodes, func(n string) bool { return !r.NodeStatus(n).Phase.Finished() })
	})
	e.wake = timeZero
	if current > r.Status.Wave {
		enter := true
		if soak := r.Spec.Soak.Duration; soak > 0 {
			healthy := true
			for _, w := range waves[:current] {
				for _, n := range w.Nodes {
					if o, ok := observed[n]; ok && !(o.Ready && (o.Running || r.NodeStatus(n).Phase == Skipped)) {
						healthy = false
					}
				}
			}
			switch {
			case !healthy:
				if r.Status.SoakSince != nil {
					r.Status.SoakSince = nil
					eager = true
				}
				enter = false
			case r.Status.SoakSince == nil:
				r.Status.SoakSince = &metav1.Time{Time: now.Time}
				eager = true
				enter = false
				e.wake = now.Time.Add(soak)
			case now.Time.Before(r.Status.SoakSince.Add(soak)):
				enter = false
				e.wake = r.Status.SoakSince.Add(soak)
			}
		}
		if enter {
			r.Status.Wave, r.Status.SoakSince = current, nil
			eager = true
		}
	}

	// 6. start
	budget := Budget(r.Spec.MaxUnavailable, len(r.Spec.Nodes))
	unavailable := 0
	for _, name := range r.Spec.Nodes {
		rec := r.NodeStatus(name)
		o, exists := observed[name]
		if rec.Phase == InProgress || rec.Cordoned || (exists && !o.Available()) {
			unavailable++
		}
	}
	if current == r.Status.Wave {
		for _, name := range waves[current].Nodes {
			rec := r.NodeStatus(name)
			if rec.Phase != Waiting || unavailable >= budget {
				continue
			}
			node := nodes[name]
			prev, _, err := source.Assigned(node)
			if err != nil {
				return true, err
			}
			var prevPin *source.Pin
			if prev != nil {
				if prevPin, err = source.PinOf(node); err != nil {
					return true, err
				}
			}
			if o := observed[name]; o.Available() {
				unavailable++
			}
			rec.Phase, rec.Started, rec.Previous, rec.PreviousPin = InProgress, &now, prev, prevPin
			rec.Cordoned = slices.Contains(r.Spec.Drain, name)
			r.Status.Nodes[name] = rec
			eager = true
		}
	}
	if eager {
		ok, err := e.write(ctx, r)
		if err != nil || !ok {
			return err != nil, err
		}
	} else if lazy {
		// Keep the lazy phases, with their times, for the next write; the
		// resourceVersion stays the one read.
		e.cur = r
	}
	if eager || lazy {
		e.notify(r, observed)
	}

	// Assign every node recorded InProgress that does not hold its target
	// yet: the ones just recorded, and any a dead client recorded.
	var todo []string
	for _, name := range e.cur.Spec.Nodes {
		rec := e.cur.NodeStatus(name)
		o, exists := observed[name]
		if rec.Phase != InProgress || !exists || o.Assigned || e.assigned[name] {
			continue
		}
		todo = append(todo, name)
	}
	if name, err := e.startNodes(ctx, todo, nodes); err != nil {
		r := e.cur.DeepCopy()
		rec := r.NodeStatus(name)
		rec.Phase, rec.Error, rec.Finished = Failed, err.Error(), &now
		r.Status.Nodes[name] = rec
		r.Status.State, r.Status.Reason = Halted, haltReason(name, rec.Error)
		return e.finish(ctx, r, observed)
	}
	return false, nil
}

var timeZero = metav1.Time{}.Time

// Live returns a copy of r with each node's phase brought up to date from
// its Node (NextPhase), what was observed of each node, and whether any
// phase changed. get returns nil for a node that does not exist; such a
// node is Skipped. now stamps the phases that changed.
func Live(r *Rollout, get func(name string) (*corev1.Node, error), now metav1.MicroTime) (*Rollout, map[string]Observed, bool, error) {
	return live(r, get, Observe, now)
}

// live is Live with observe in place of Observe.
func live(r *Rollout, get func(name string) (*corev1.Node, error), observe func(*corev1.Node, *corev1.NodeConfigSource, *source.Pin) (Observed, error), now metav1.MicroTime) (*Rollout, map[string]Observed, bool, error) {
	r = r.DeepCopy()
	if r.Status.Nodes == nil {
		r.Status.Nodes = map[string]NodeStatus{}
	}
	changed := false
	observed := map[string]Observed{}
	for _, name := range r.Spec.Nodes {
		rec := r.NodeStatus(name)
		node, err := get(name)
		if err != nil {
			return nil, nil, false, fmt.Errorf("get node %q: %w", name, err)
		}
		if node == nil {
			if !rec.Phase.Finished() && rec.Phase != Failed {
				rec.Phase, rec.Error, rec.Finished = Skipped, "node not found", &now
				r.Status.Nodes[name] = rec
				changed = true
			}
			continue
		}
		target, pin := r.Spec.Target(name)
		o, err := observe(node, target, pin)
		if err != nil {
			o.Error = err.Error()
		}
		observed[name] = o
		phase, msg := NextPhase(rec, o)
		if phase == rec.Phase && msg == rec.Error {
			continue
		}
		rec.Phase, rec.Error = phase, msg
		switch phase {
		case InProgress:
			if rec.Started == nil {
				rec.Started = &now
			}
		case Succeeded, Skipped, Failed:
			rec.Finished = &now
		}
		r.Status.Nodes[name] = rec
		changed = true
	}
	return r, observed, changed, nil
}

// takeState records the state the rollout's spec asks for (Rollout.State)
// when its status does not show it yet: the operator paused, resumed or
// aborted it, or no driver has looked at it. It reports false when another
// client wrote the rollout first; the pass is then redone on fresh state.
func (e *engine) takeState(ctx context.Context) (bool, error) {
	want := e.cur.State()
	if want == e.cur.Status.State {
		return true, nil
	}
	r := e.cur.DeepCopy()
	r.Status.State, r.Status.Reason = want, ""
	if want == Aborted {
		r.Status.Reason = "aborted (spec.aborted)"
		if e.cur.Status.State == Halted {
			r.Status.Reason += " after it halted: " + e.cur.Status.Reason
		}
	}
	return e.write(ctx, r)
}

// samePhases reports whether a and b show the same state and node phases.
func samePhases(a, b *Rollout) bool {
	if a.Status.State != b.Status.State || a.Status.Reason != b.Status.Reason || a.Status.Wave != b.Status.Wave {
		return false
	}
	for _, n := range b.Spec.Nodes {
		x, y := a.NodeStatus(n), b.NodeStatus(n)
		if x.Phase != y.Phase || x.Error != y.Error || x.Cordoned != y.Cordoned {
			return false
		}
	}
	return true
}

// follow reports r, with its nodes' phases as observed, when it changed
// since the last report; it ends the watch once the rollout is final.
func (e *engine) follow(r *Rollout, observed map[string]Observed) (bool, error) {
	if e.last == nil || !samePhases(e.last, r) {
		e.last = r
		if e.opts.OnChange != nil {
			e.opts.OnChange(r.DeepCopy(), observed)
		}
	}
	if r.Status.State.Terminal() {
		return true, stateError(r)
	}
	return false, nil
}

// finish writes r in a final state and returns what Run returns.
func (e *engine) finish(ctx context.Context, r *Rollout, observed map[string]Observed) (bool, error) {
	ok, err := e.write(ctx, r)
	if err != nil {
		return true, err
	}
	if !ok {
		return false, nil // lost a race: look again
	}
	e.notify(e.cur, observed)
	return true, stateError(e.cur)
}

func (e *engine) notify(r *Rollout, observed map[string]Observed) {
	if e.opts.OnChange != nil {
		e.opts.OnChange(r.DeepCopy(), observed)
	}
}

// startNodes drains (where the rollout must) and assigns the nodes in
// names, up to Options.Parallel at once, in their order. Every one of them
// is recorded InProgress already, so the budget holds however many run at
// once. On the first failure no further node is started; the ones under
// way finish. startNodes returns the first node that failed and its error.
func (e *engine) startNodes(ctx context.Context, names []string, nodes map[string]*corev1.Node) (string, error) {
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
				err := e.startNode(ctx, name, e.cur.NodeStatus(name), nodes[name])
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
func (e *engine) startNode(ctx context.Context, name string, rec NodeStatus, node *corev1.Node) error {
	logger := klog.FromContext(ctx).WithValues("node", name, "rollout", e.cur.Name)
	if rec.Cordoned {
		logger.V(2).Info("Draining node")
		if err := e.opts.Drainer.Drain(ctx, name); err != nil {
			if uerr := e.opts.Drainer.Uncordon(ctx, name); uerr != nil {
				logger.Error(uerr, "Uncordon after a failed drain")
			}
			return err
		}
	}
	target, pin := e.cur.Spec.Target(name)
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

// maxAssignConflicts bounds assignOver's attempts on a Node that keeps
// changing.
const maxAssignConflicts = 5

// assignOver assigns the node named name its target through carrier,
// provided it still holds previous, the assignment the rollout recorded for
// it when it started it. The patch is conditional on the resourceVersion of
// the Node as last seen (node, from the informer; nil: read it first), and
// on a conflict the Node is read again. A node that then holds its target
// was assigned by another client driving the rollout; one that holds
// anything else was assigned outside the rollout meanwhile (during its
// drain, say): it is left as it is, and its error, the one NextPhase gives
// such a node, halts the rollout.
func assignOver(ctx context.Context, client kubernetes.Interface, name string, node *corev1.Node, carrier source.Carrier, target *corev1.NodeConfigSource, pin *source.Pin, previous *corev1.NodeConfigSource) error {
	for range maxAssignConflicts {
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
		if !apierrors.IsConflict(err) {
			return err
		}
		node = nil
	}
	return fmt.Errorf("assign node %q: the Node changed under each of %d attempts", name, maxAssignConflicts)
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
