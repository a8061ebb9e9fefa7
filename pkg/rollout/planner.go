// Planning a rollout: the one set of rules by which `rollout start`,
// `rollout undo` and a pool's controller turn what was asked (a Request)
// and what they found in the cluster (Facts) into the rollout to create.
// Plan is pure; the callers differ only in how they gather the facts (the
// CLI reads the kubelets' /configz, and /flagz where a Node does not record
// its flags; the controller only Node objects and ConfigMaps) and in what
// they do with a refusal. docs/rollout.md, "How a
// rollout is planned", states these rules.

package rollout

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/kubectl-dkc/dkc/pkg/flagz"
	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// Defaults of a rollout, whoever asks for it: rollout start's flags and a
// pool's strategy.
const (
	// DefaultMaxUnavailable is the budget: one node at a time.
	DefaultMaxUnavailable = 1
	// DefaultCanary is how many nodes go first, alone.
	DefaultCanary = 1
	// DefaultDrainTimeout bounds one node's evictions.
	DefaultDrainTimeout = 5 * time.Minute
	// maxNameBase is how much of a generated name's base is kept: the
	// rest of the name is "-" and a suffix (undo adds "undo-").
	maxNameBase = 40
)

// OverlapPolicy is what Plan does with a node that another unfinished
// rollout covers.
type OverlapPolicy string

const (
	// RefuseOverlap refuses the whole rollout (rollout start, undo): the
	// operator decides.
	RefuseOverlap OverlapPolicy = ""
	// WaitOnOverlap leaves such nodes out, to be planned again once the
	// other rollout ended (a pool); when it leaves every node out, Plan
	// returns the *OverlapError.
	WaitOnOverlap OverlapPolicy = "Wait"
)

// Request is what a rollout is asked to do: by an operator's flags or by a
// pool's spec. A nil pointer asks for the default.
type Request struct {
	Namespace string
	// Name is the rollout's name. When empty, it is generated: the
	// config's name ("to-local" for local configs; "undo-" and the undone
	// rollout's name for an undo), cut to 40 characters, then "-" and
	// Suffix.
	Name string
	// Suffix ends a generated name; the caller draws it
	// (utilrand.String(5)), so that Plan stays a function of its input.
	Suffix string
	// Config is the target of every node; nil: their local configs.
	Config *corev1.NodeConfigSource
	// AllowUnsafe are the classes Config's pin allows.
	AllowUnsafe []string
	// Pin, when set, is the pin to roll Config out under (the bytes a
	// pool's revision fixed); otherwise Plan pins Facts.Payload.
	Pin *source.Pin
	// Selector is how the nodes were chosen (-l; "" for every node).
	Selector string
	// BySelector: Facts.Nodes are every node Selector selects, and the
	// rollout covers Selector rather than list them (Spec.Nodes), so that
	// its size does not grow with the fleet; a node that joins later is
	// rolled to as well.
	BySelector     bool
	MaxUnavailable *intstr.IntOrString
	Canary         *int
	Soak           time.Duration
	OrderByLabel   string
	// Drain allows Plan to drain the nodes whose change needs it; without
	// it, such a change is refused.
	Drain bool
	// DrainTimeout bounds one node's evictions (0: forever).
	DrainTimeout            *time.Duration
	DrainForce              bool
	DrainDeleteEmptyDirData bool
	// UndoOf, when set, is the rollout to undo: every node it started
	// goes back to what it held before, under its strategy unless the
	// request overrides MaxUnavailable or Canary. Config, AllowUnsafe,
	// Pin, Soak, OrderByLabel and the drain options are then UndoOf's,
	// and Facts.Nodes must hold every node whose mark names UndoOf.
	UndoOf *Rollout
	// Overlap is what to do with a node another unfinished rollout covers.
	Overlap OverlapPolicy
	// Windows are the maintenance windows in which nodes start; none: at
	// any time. An undo is not held to the undone rollout's windows.
	Windows Windows
	// PauseOnAlerts holds the rollout while an alert fires; nil: never.
	// An undo is not held by the undone rollout's alerts.
	PauseOnAlerts *PauseOnAlerts
}

// Facts are what the caller found in the cluster. Anything it could not
// find out is left out, and Plan treats it as the rules say.
type Facts struct {
	// Nodes are the nodes to roll out to (for an undo, its nodes as they
	// are now; one missing is taken as holding nothing known).
	Nodes []corev1.Node
	// Payload is Request.Config's bytes.
	Payload []byte
	// Configs are the kubelet configs of the ConfigMaps the caller read:
	// those the nodes report active, and an undo's targets (ConfigKey).
	Configs map[string]*kubeletconfigv1beta1.KubeletConfiguration
	// Live are the configs the nodes' kubelets run, by node, as their
	// /configz showed them, where the caller could read them.
	Live map[string]*kubeletconfigv1beta1.KubeletConfiguration
	// Rollouts are the other rollouts that could cover the nodes: every
	// rollout of the namespace, or, for a pool, those not its own.
	Rollouts []*Rollout
	// Flags are the config fields the nodes' kubelet flags set, by node,
	// as the caller read them from /flagz, of nodes whose Node does not
	// record them (flagz.ReadUnrecorded); a Node's record comes first.
	Flags map[string][]flagz.Shadow
}

// ConfigKey names src's config in Facts.Configs.
func ConfigKey(src *corev1.NodeConfigSource) string {
	if src == nil || src.ConfigMap == nil {
		return ""
	}
	ref := src.ConfigMap
	return ref.Namespace + "/" + ref.Name + ":" + ref.KubeletConfigKey
}

// Plan returns the rollout that req asks for, given facts, and warnings for
// the operator; or why it must not start. Its errors are an
// *OverlapError, a *flagz.ShadowError, a *DrainError, a
// *NodeSpecificError, or, for an undo, ErrNothingToUndo. It reads nothing
// and writes nothing.
func Plan(req Request, facts Facts) (*Rollout, []string, error) {
	nodes := map[string]*corev1.Node{}
	for i := range facts.Nodes {
		nodes[facts.Nodes[i].Name] = &facts.Nodes[i]
	}
	var (
		spec     Spec
		warnings []string
	)
	if req.UndoOf != nil {
		if req.UndoOf.UID == "" {
			return nil, nil, fmt.Errorf("undo of rollout %q: it has no UID, which its nodes' marks name: read it from the cluster", req.UndoOf.Name)
		}
		spec = undoSpec(req.UndoOf)
	} else {
		spec = Spec{
			Config:       req.Config,
			Pin:          req.Pin,
			Nodes:        Order(facts.Nodes, req.OrderByLabel),
			Selector:     req.Selector,
			Soak:         metav1.Duration{Duration: req.Soak},
			OrderByLabel: req.OrderByLabel,
			DrainOptions: DrainSpec{
				Timeout:            metav1.Duration{Duration: DefaultDrainTimeout},
				Force:              req.DrainForce,
				DeleteEmptyDirData: req.DrainDeleteEmptyDirData,
			},
			MaxUnavailable: intstr.FromInt32(DefaultMaxUnavailable),
			Canary:         DefaultCanary,
		}
		if req.DrainTimeout != nil {
			spec.DrainOptions.Timeout.Duration = *req.DrainTimeout
		}
		if spec.Config != nil && spec.Pin == nil {
			spec.Pin = source.NewPin(spec.Config, facts.Payload, req.AllowUnsafe)
		}
		if len(spec.Nodes) == 0 {
			return nil, nil, errors.New("no nodes to roll out to")
		}
	}
	if err := req.Windows.Validate("windows"); err != nil {
		return nil, nil, err
	}
	spec.Windows = req.Windows.DeepCopy()
	if err := ValidatePauseOnAlerts(req.PauseOnAlerts, "pauseOnAlerts"); err != nil {
		return nil, nil, err
	}
	spec.PauseOnAlerts = req.PauseOnAlerts.DeepCopy()
	if req.MaxUnavailable != nil {
		spec.MaxUnavailable = *req.MaxUnavailable
	}
	if req.Canary != nil {
		spec.Canary = *req.Canary
	}

	// view is the rollout as the rules read it: an undo's nodes and their
	// targets are those its marks give (Resolve).
	view := New(req.Namespace, "", spec)
	if req.UndoOf != nil {
		ptrs := source.NodePointers(facts.Nodes)
		spec.AllowUnsafe = previousClasses(req.UndoOf, ptrs)
		view.Spec.AllowUnsafe = spec.AllowUnsafe
		var err error
		if view, err = Resolve(view, ptrs, nil); err != nil {
			return nil, nil, err
		}
		if len(view.Spec.Nodes) == 0 {
			return nil, nil, ErrNothingToUndo
		}
	}

	// Overlap: one unfinished rollout at a time over a node.
	undone := ""
	if req.UndoOf != nil {
		undone = req.UndoOf.Name
	}
	covered := make([]*corev1.Node, 0, len(view.Spec.Nodes))
	for _, n := range view.Spec.Nodes {
		if node, ok := nodes[n]; ok {
			covered = append(covered, node)
		}
	}
	held := map[string]bool{}
	if overlaps := Overlaps(covered, facts.Rollouts, undone); len(overlaps) > 0 {
		if req.Overlap != WaitOnOverlap || len(overlaps) == len(view.Spec.Nodes) {
			return nil, nil, &OverlapError{Overlaps: overlaps}
		}
		for _, o := range overlaps {
			held[o.Node] = true
			warnings = append(warnings, fmt.Sprintf("node/%s waits for rollout %s (%s) to end", o.Node, o.Rollout, o.State))
		}
		view.Spec.Nodes = slices.DeleteFunc(view.Spec.Nodes, func(n string) bool { return held[n] })
	}

	// Flags: a field a kubelet's flag sets never changes through a config.
	if req.UndoOf == nil && spec.Config != nil {
		if err := flagz.Check(facts.Payload, covered, facts.Flags); err != nil {
			return nil, warnings, err
		}
	}

	var target *kubeletconfigv1beta1.KubeletConfiguration
	if req.UndoOf == nil && spec.Config != nil {
		cfg, _, err := kubeletconfig.Decode(facts.Payload, kubeletconfig.DecodeOptions{AllowUnknownFields: true})
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("config %s does not decode (%v): the agents will refuse it", DescribeTarget(spec.Config), err))
		} else {
			target = cfg
		}
	}

	// Drain: where the change of a resource manager policy needs it.
	drain, err := planDrain(req, &view.Spec, facts, nodes, target)
	if err != nil {
		return nil, warnings, err
	}

	// Node-specific fields: one node's values, for many.
	if req.UndoOf == nil && spec.Config != nil {
		if found := nodeSpecific(facts.Payload, covered, facts.Live); len(found) > 0 {
			return nil, warnings, &NodeSpecificError{Config: DescribeTarget(spec.Config), Found: found}
		}
	}

	// What the object stores: a rollout over a selector, and an undo, do
	// not list their nodes, so their size does not depend on the fleet's;
	// they drain each node or none. One that leaves nodes out for another
	// rollout lists the others.
	switch {
	case len(held) > 0:
		spec.Nodes, spec.Drain = view.Spec.Nodes, drain
		spec.Targets, spec.TargetPins = view.Spec.Targets, view.Spec.TargetPins
		spec.UndoOfUID, spec.AllowUnsafe = "", nil
	case req.UndoOf != nil:
		spec.DrainAll = len(drain) > 0
		if len(drain) > 0 && len(drain) < len(view.Spec.Nodes) {
			warnings = append(warnings, fmt.Sprintf("%d of %d nodes need a drain; the undo drains every node it sends back", len(drain), len(view.Spec.Nodes)))
		}
	case req.BySelector:
		spec.Nodes, spec.DrainAll = nil, len(drain) > 0
		if len(drain) > 0 && len(drain) < len(view.Spec.Nodes) {
			warnings = append(warnings, fmt.Sprintf("%d of %d nodes need a drain; a rollout over a selector drains every node it starts (name the nodes to drain only those)", len(drain), len(view.Spec.Nodes)))
		}
	default:
		spec.Drain = drain
	}

	name := req.Name
	if name == "" {
		base := "to-local"
		switch {
		case req.UndoOf != nil:
			base = "undo-" + cutName(req.UndoOf.Name)
		case spec.Config != nil && spec.Config.ConfigMap != nil:
			base = cutName(spec.Config.ConfigMap.Name)
		}
		name = base + "-" + req.Suffix
	}
	return New(req.Namespace, name, spec), warnings, nil
}

// cutName cuts a generated name's base to maxNameBase characters, without
// a trailing "-" or ".".
func cutName(base string) string {
	if len(base) > maxNameBase {
		base = strings.TrimRight(base[:maxNameBase], "-.")
	}
	return base
}

// classes are the safety classes pin allows.
func classes(pin *source.Pin) []kubeletconfig.SafetyClass {
	if pin == nil {
		return nil
	}
	out := make([]kubeletconfig.SafetyClass, len(pin.AllowUnsafe))
	for i, c := range pin.AllowUnsafe {
		out[i] = kubeletconfig.SafetyClass(c)
	}
	return out
}

// Overlap is a node that another unfinished rollout covers.
type Overlap struct {
	Node    string
	Rollout string
	State   State
}

// Overlaps lists the nodes among nodes that an unfinished (Running or
// Paused) rollout of rollouts covers (Covers), other than the one named
// except, in the order of nodes. A rollout whose selector does not parse
// covers every node: no driver can tell which it would take.
func Overlaps(nodes []*corev1.Node, rollouts []*Rollout, except string) []Overlap {
	type open struct {
		r   *Rollout
		sel labels.Selector
	}
	var unfinished []open
	for _, r := range rollouts {
		if r.Name == except || r.State().Terminal() {
			continue
		}
		sel, err := Selects(r)
		if err != nil {
			sel = labels.Everything()
		}
		unfinished = append(unfinished, open{r, sel})
	}
	var out []Overlap
	for _, n := range nodes {
		mark, _ := MarkOf(n)
		for _, u := range unfinished {
			if Covers(u.r, u.sel, n, mark) {
				out = append(out, Overlap{Node: n.Name, Rollout: u.r.Name, State: u.r.State()})
				break
			}
		}
	}
	return out
}

// OverlapError is Plan's refusal of nodes that another unfinished rollout
// covers: the two would fight over them.
type OverlapError struct {
	Overlaps []Overlap
}

func (e *OverlapError) Error() string {
	o := e.Overlaps[0]
	return fmt.Sprintf("rollout %q is %s over node/%s: finish it (kubectl dkc rollout resume %s) or abort it (kubectl dkc rollout abort %s) first",
		o.Rollout, o.State, o.Node, o.Rollout, o.Rollout)
}

// planDrain returns the nodes of spec to drain: those whose change from
// the config they run to their target changes a resource manager policy,
// and for an undo also those the undone rollout drained. What a node runs
// is its kubelet's /configz when known, else the ConfigMap it reports
// active, else unknown; an unknown config, like a target that cannot be
// read (a node's local config), counts as the kubelet's defaults. So a
// node nothing is known of is drained whenever its target sets a resource
// manager policy. A drain that req does not allow is refused (an undo may
// always drain), and so is a change of a class the target's pin does not
// allow.
func planDrain(req Request, spec *Spec, facts Facts, nodes map[string]*corev1.Node, target *kubeletconfigv1beta1.KubeletConfiguration) ([]string, error) {
	var (
		needs   []DrainNeed
		refused *DrainError
	)
	for _, n := range spec.Nodes {
		src, pin := spec.Target(n)
		newCfg := target
		if req.UndoOf != nil {
			newCfg = facts.Configs[ConfigKey(src)]
		}
		changes := DrainChanges(runningConfig(nodes[n], facts), newCfg)
		undone := false
		if req.UndoOf != nil && nodes[n] != nil {
			m, _ := MarkOf(nodes[n])
			undone = m != nil && m.UID == req.UndoOf.UID && m.Cordoned
		}
		if len(changes) == 0 && !undone {
			continue
		}
		need := DrainNeed{Node: n, Changes: changes}
		needs = append(needs, need)
		// The agents do not check a node's local config, and an undo gives
		// each node back its previous pin, against which its agent judges
		// the change.
		if r := kubeletconfig.Refused(changes, classes(pin)); src != nil && req.UndoOf == nil && len(r) > 0 && refused == nil {
			refused = &DrainError{Config: DescribeTarget(src), Needs: []DrainNeed{need}, Refused: r}
		}
	}
	switch {
	case len(needs) == 0:
		return nil, nil
	case !req.Drain && req.UndoOf == nil:
		return nil, &DrainError{Config: DescribeTarget(spec.Config), Needs: needs}
	case refused != nil:
		return nil, refused
	}
	names := make([]string, len(needs))
	for i, n := range needs {
		names[i] = n.Node
	}
	return names, nil
}

// runningConfig is the config node runs, as far as facts know: its kubelet's
// /configz, else the ConfigMap it reports active; nil when unknown.
func runningConfig(node *corev1.Node, facts Facts) *kubeletconfigv1beta1.KubeletConfiguration {
	if node == nil {
		return nil
	}
	if cfg, ok := facts.Live[node.Name]; ok {
		return cfg
	}
	if st, _, err := source.Status(node); err == nil && st != nil && st.Active != nil {
		return facts.Configs[ConfigKey(st.Active)]
	}
	return nil
}

// DrainNeed is one node whose change needs it drained.
type DrainNeed struct {
	Node    string
	Changes []kubeletconfig.Change
}

// DrainError is Plan's refusal of a change that needs a drain: the request
// does not allow it (Refused empty), or the change is of a class the
// target's pin does not allow (Refused).
type DrainError struct {
	Config  string
	Needs   []DrainNeed
	Refused []kubeletconfig.Change
}

func (e *DrainError) Error() string {
	what := "config " + e.Config
	if len(e.Refused) > 0 {
		return fmt.Sprintf("%s changes %s, which the agents refuse unless the rollout allows it: add %s (a pool: spec.allowUnsafe)",
			what, kubeletconfig.FormatChanges(e.Refused), kubeletconfig.AllowFlag(e.Refused))
	}
	first := e.Needs[0]
	where := "node/" + first.Node
	if len(e.Needs) > 1 {
		where += fmt.Sprintf(" and %d more nodes", len(e.Needs)-1)
	}
	return fmt.Sprintf("%s changes %s on %s: the kubelet must not run pods through that change: add --drain (a pool: spec.strategy.drain: true) to cordon and drain each such node first",
		what, FormatChanges(first.Changes), where)
}

// NodeSpecificError is Plan's refusal of a config that carries one node's
// values for many: what to do about each.
type NodeSpecificError struct {
	Config string
	Found  []NodeSpecificValue
}

func (e *NodeSpecificError) Error() string {
	parts := make([]string, len(e.Found))
	for i, v := range e.Found {
		parts[i] = v.String()
	}
	return fmt.Sprintf("config %s sets node-specific fields to one node's values while the target nodes differ: %s. Remove these fields from the config, or run the agents with --apply-mode=dropin and roll out a partial config with only the fields you change (docs/rollout.md, \"One config for every node\")",
		e.Config, strings.Join(parts, "; "))
}

// ErrNothingToUndo: the rollout to undo started no node.
var ErrNothingToUndo = errors.New("nothing to undo: the rollout started no node")

// undoSpec is the spec of the rollout that undoes orig: every node orig
// started (its mark still names orig: one a later rollout started is that
// rollout's to undo) goes back to the assignment and pin its mark recorded,
// with orig's budget, canary, soak and drain options. A node that held no
// pin gets none, and its agent refuses until it is assigned again.
func undoSpec(orig *Rollout) Spec {
	spec := Spec{
		MaxUnavailable: orig.Spec.MaxUnavailable,
		Canary:         orig.Spec.Canary,
		Soak:           orig.Spec.Soak,
		OrderByLabel:   orig.Spec.OrderByLabel,
		DrainOptions:   orig.Spec.DrainOptions,
		UndoOf:         orig.Name,
		UndoOfUID:      orig.UID,
	}
	if spec.MaxUnavailable == (intstr.IntOrString{}) {
		spec.MaxUnavailable = intstr.FromInt32(DefaultMaxUnavailable)
	}
	return spec
}

// previousClasses are the classes that the previous pins of the nodes orig
// marked allow, each once, sorted: what an undo of orig gives back.
func previousClasses(orig *Rollout, nodes []*corev1.Node) []string {
	var out []string
	for _, n := range nodes {
		if m, err := MarkOf(n); err == nil && m != nil && m.UID == orig.UID && m.PreviousPin != nil {
			out = append(out, m.PreviousPin.AllowUnsafe...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// AllowedClasses are the unsafe classes r's pins allow (an undo's: its
// AllowUnsafe), each once, sorted: what its author must be allowed to use.
func AllowedClasses(r *Rollout) []string {
	out := slices.Clone(r.Spec.AllowUnsafe)
	if r.Spec.Pin != nil {
		out = append(out, r.Spec.Pin.AllowUnsafe...)
	}
	for _, p := range r.Spec.TargetPins {
		if p != nil {
			out = append(out, p.AllowUnsafe...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
