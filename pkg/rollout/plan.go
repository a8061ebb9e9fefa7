package rollout

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// Order returns the names of nodes in rollout order: by the value of label
// when label is not empty (nodes without it last), then by name. The order
// does not depend on the order of nodes.
func Order(nodes []corev1.Node, label string) []string {
	return order(source.NodePointers(nodes), label)
}

// order is Order over pointers, which it sorts in place: a pass orders the
// whole fleet, and moving Node values costs more than comparing them.
func order(nodes []*corev1.Node, label string) []string {
	slices.SortFunc(nodes, func(a, b *corev1.Node) int {
		if label != "" {
			av, aok := a.Labels[label]
			bv, bok := b.Labels[label]
			switch {
			case aok && !bok:
				return -1
			case !aok && bok:
				return 1
			}
			if c := cmp.Compare(av, bv); c != 0 {
				return c
			}
		}
		return cmp.Compare(a.Name, b.Name)
	})
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	return names
}

// ParseMaxUnavailable parses --max-unavailable: a count ("2") or a
// percentage ("10%").
func ParseMaxUnavailable(s string) (intstr.IntOrString, error) {
	v := intstr.Parse(s)
	if v.Type == intstr.String {
		if !strings.HasSuffix(s, "%") {
			return v, fmt.Errorf("invalid --max-unavailable %q: want a count such as 1 or a percentage such as 10%%", s)
		}
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, 100, false)
	if err != nil {
		return v, fmt.Errorf("invalid --max-unavailable %q: want a count such as 1 or a percentage such as 10%%", s)
	}
	if n <= 0 {
		return v, fmt.Errorf("invalid --max-unavailable %q: must be at least 1 (or 1%%)", s)
	}
	return v, nil
}

// Budget is how many of total nodes may be unavailable at once: v scaled
// to total and rounded down, but at least 1 so that a rollout can move.
func Budget(v intstr.IntOrString, total int) int {
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, total, false)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// Wave is a group of nodes that starts only when every node before it is
// done (and has soaked). Within a wave, the budget alone bounds the nodes
// under way: a slot freed by a finished node goes at once to the wave's
// next waiting node.
type Wave struct {
	Index  int      `json:"index"`
	Canary bool     `json:"canary,omitempty"`
	Nodes  []string `json:"nodes"`
}

// Label names w in a table: its index, and "(canary)" for the canary wave.
func (w Wave) Label() string {
	if w.Canary {
		return fmt.Sprintf("%d (canary)", w.Index)
	}
	return fmt.Sprint(w.Index)
}

// Waves splits spec.Nodes into waves: the first Canary nodes alone, then,
// with a soak, waves as large as the budget, each soaked before the next;
// without one, the rest in one wave, over which the budget slides as a
// DaemonSet's maxUnavailable does. Within a wave the budget applies, so a
// wave may start in parts while other nodes are unavailable.
func Waves(spec *Spec) []Wave {
	var waves []Wave
	nodes := spec.Nodes
	if c := min(spec.Canary, len(nodes)); c > 0 {
		waves = append(waves, Wave{Index: 0, Canary: true, Nodes: slices.Clone(nodes[:c])})
		nodes = nodes[c:]
	}
	size := len(nodes)
	if spec.Soak.Duration > 0 {
		size = Budget(spec.MaxUnavailable, len(spec.Nodes))
	}
	for len(nodes) > 0 {
		n := min(size, len(nodes))
		waves = append(waves, Wave{Index: len(waves), Nodes: slices.Clone(nodes[:n])})
		nodes = nodes[n:]
	}
	return waves
}

// DrainClass holds the fields whose change empties a node first: the
// resource managers' policies (safety class resource-managers).
const DrainClass = kubeletconfig.ResourceManagers

// DrainChanges lists the changes from oldCfg to newCfg that need the node
// drained. A nil config stands for the kubelet's defaults.
func DrainChanges(oldCfg, newCfg *kubeletconfigv1beta1.KubeletConfiguration) []kubeletconfig.Change {
	if oldCfg == nil {
		oldCfg = &kubeletconfigv1beta1.KubeletConfiguration{}
	}
	if newCfg == nil {
		newCfg = &kubeletconfigv1beta1.KubeletConfiguration{}
	}
	var out []kubeletconfig.Change
	for _, c := range kubeletconfig.Classify(oldCfg, newCfg) {
		if c.Class == DrainClass {
			out = append(out, c)
		}
	}
	return out
}

// SetsDrainField reports whether cfg sets a resource manager policy to
// something other than its default; only then can a rollout need a drain.
func SetsDrainField(cfg *kubeletconfigv1beta1.KubeletConfiguration) bool {
	return cfg != nil && len(DrainChanges(nil, cfg)) > 0
}

// FormatChanges shows changes as `field "old" -> "new"`, comma-separated.
func FormatChanges(changes []kubeletconfig.Change) string {
	parts := make([]string, len(changes))
	for i, c := range changes {
		parts[i] = fmt.Sprintf("%s %q -> %q", c.Field, c.Old, c.New)
	}
	return strings.Join(parts, ", ")
}
