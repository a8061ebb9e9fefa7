package rollout

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// UndoSpec is the spec of the rollout that undoes orig: every node orig
// started goes back to its Previous assignment, in orig's order, with its
// budget, canary, soak and drain, under its previous pin (the bytes it was
// assigned before; a node that held no pin gets none, and its agent refuses
// until it is assigned again). The nodes orig queued go back too: a client
// may have started one that no write of orig records in progress yet (a
// pause or abort that came while it assigned it); the others hold their
// Previous already, and the undo skips them.
func UndoSpec(orig *Rollout) (Spec, error) {
	spec := Spec{
		Targets:        map[string]*corev1.NodeConfigSource{},
		TargetPins:     map[string]*source.Pin{},
		Selector:       orig.Spec.Selector,
		MaxUnavailable: orig.Spec.MaxUnavailable,
		Canary:         orig.Spec.Canary,
		Soak:           orig.Spec.Soak,
		OrderByLabel:   orig.Spec.OrderByLabel,
		DrainOptions:   orig.Spec.DrainOptions,
		Drain:          orig.Spec.Drain,
		UndoOf:         orig.Name,
	}
	if spec.MaxUnavailable == (intstr.IntOrString{}) {
		spec.MaxUnavailable = intstr.FromInt32(1)
	}
	started := 0
	for _, n := range orig.Spec.Nodes {
		ns := orig.NodeStatus(n)
		switch {
		case ns.Phase == Waiting && ns.Queued:
		case ns.Phase == Waiting || ns.Phase == Skipped || ns.Started == nil:
			continue
		default:
			started++
		}
		spec.Nodes = append(spec.Nodes, n)
		spec.Targets[n] = ns.Previous
		if ns.PreviousPin != nil {
			spec.TargetPins[n] = ns.PreviousPin
		}
	}
	if started == 0 {
		return spec, errors.New("nothing to undo: the rollout started no node")
	}
	return spec, nil
}
