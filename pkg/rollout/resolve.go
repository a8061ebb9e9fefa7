// A rollout's nodes. A rollout over a selector, and an undo, do not list
// their nodes in the object, so that its size does not grow with the
// fleet: each driver's pass, and each reader, resolves them from the nodes
// as they are (Resolve), the way a DaemonSet's nodes are the ones its
// selector picks now.

package rollout

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// Lists reports whether r lists its nodes (Spec.Nodes): the operator named
// them, or an earlier dkc started it. Otherwise Resolve finds them.
func Lists(r *Rollout) bool { return len(r.Spec.Nodes) > 0 }

// Drains reports whether r drains any node: the creator of such a
// rollout needs the right to evict pods (admission policy
// kubectl-dkc-rollout-opt-in).
func Drains(r *Rollout) bool { return len(r.Spec.Drain) > 0 || r.Spec.DrainAll }

// Selects returns the selector of r's nodes: Spec.Selector parsed (every
// node when it is empty).
func Selects(r *Rollout) (labels.Selector, error) {
	sel, err := labels.Parse(r.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("rollout %q: spec.selector: %w", r.Name, err)
	}
	return sel, nil
}

// Covers reports whether node, whose mark is mark, is one of r's nodes. A
// rollout over a selector covers the nodes it selects and the nodes it
// started (their mark names it), selected or not: a node that loses the
// label during its apply still counts against the budget, and no other
// rollout takes it over meanwhile.
func Covers(r *Rollout, sel labels.Selector, node *corev1.Node, mark *Mark) bool {
	switch {
	case Lists(r):
		return slices.Contains(r.Spec.Nodes, node.Name)
	case r.Spec.UndoOfUID != "":
		return mark != nil && (mark.Owns(r) || mark.UID == r.Spec.UndoOfUID)
	}
	return mark.Owns(r) || sel.Matches(labels.Set(node.Labels))
}

// Resolve returns r as the rules read it (decide, Live, Waves): with its
// nodes in Spec.Nodes, in rollout order, and, where the object does not
// store them, the nodes to drain in Spec.Drain and each node's own target
// in Spec.Targets and Spec.TargetPins. It returns r itself when r lists
// its nodes. nodes are the nodes to look among; markOf reads a node's mark
// (MarkOf when nil). A node whose mark does not decode counts as unmarked.
//
//   - A rollout over a selector covers the nodes it started (their mark
//     names it), in the order it started them, whether the selector picks
//     them still or not, then the others it selects now, in Order. With
//     DrainAll each is drained.
//   - An undo covers the nodes whose mark names the undone rollout
//     (UndoOfUID), each going back to the assignment and pin its mark
//     recorded; and the nodes it started itself, whose marks record their
//     targets. They are in the order they were started. A pin that allows
//     a class the undo's AllowUnsafe does not is left out: its author was
//     not admitted for it, and the node's agent refuses a target with no
//     pin. With DrainAll each node is drained.
//
// The first nodes stay first as the rollout goes on, so its canary and
// waves do not change under it; a node that joins later joins the order.
func Resolve(r *Rollout, nodes []*corev1.Node, markOf func(*corev1.Node) (*Mark, error)) (*Rollout, error) {
	if Lists(r) {
		return r, nil
	}
	if markOf == nil {
		markOf = MarkOf
	}
	sel, err := Selects(r)
	if err != nil {
		return nil, err
	}
	undo := r.Spec.UndoOfUID != ""
	type member struct {
		node *corev1.Node
		mark *Mark
	}
	var started []member
	var rest []*corev1.Node
	for _, n := range nodes {
		mark, err := markOf(n)
		if err != nil {
			mark = nil
		}
		if !Covers(r, sel, n, mark) {
			continue
		}
		if mark.Owns(r) || undo {
			started = append(started, member{n, mark})
		} else {
			rest = append(rest, n)
		}
	}
	slices.SortFunc(started, func(a, b member) int {
		if c := a.mark.Started.Compare(b.mark.Started.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.node.Name, b.node.Name)
	})

	out := r.DeepCopy()
	out.Spec.Nodes = make([]string, 0, len(started)+len(rest))
	if undo {
		out.Spec.Targets = make(Targets, len(started))
		out.Spec.TargetPins = make(TargetPins, len(started))
	}
	for _, m := range started {
		name := m.node.Name
		out.Spec.Nodes = append(out.Spec.Nodes, name)
		if !undo {
			continue
		}
		var target *corev1.NodeConfigSource
		var pin *source.Pin
		if m.mark.Owns(r) {
			target, pin = m.mark.Target, m.mark.TargetPin
		} else {
			target, pin = m.mark.Previous, m.mark.PreviousPin
		}
		out.Spec.Targets[name] = target
		if pin != nil && allows(r.Spec.AllowUnsafe, pin.AllowUnsafe) {
			out.Spec.TargetPins[name] = pin
		}
	}
	out.Spec.Nodes = append(out.Spec.Nodes, order(rest, r.Spec.OrderByLabel)...)
	if r.Spec.DrainAll {
		out.Spec.Drain = slices.Clone(out.Spec.Nodes)
	}
	return out, nil
}

// allows reports whether every class of want is in have.
func allows(have, want []string) bool {
	for _, c := range want {
		if !slices.Contains(have, c) {
			return false
		}
	}
	return true
}
