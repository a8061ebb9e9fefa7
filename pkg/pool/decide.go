package pool

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dkc/dkc/pkg/apis/dkc/v1alpha1"
	"github.com/kubectl-dkc/dkc/pkg/flagz"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// maxConflictNames bounds status.conflictingNodes.
const maxConflictNames = 10

// Input is what the controller read for one pool.
type Input struct {
	Pool *Pool
	// Others are the other pools of the namespace.
	Others []*Pool
	Nodes  []*corev1.Node
	// Rollouts are the pool's rollouts (Label).
	Rollouts []*rollout.Rollout
	// Foreign are the other rollouts of the namespace: a node that an
	// unfinished one covers waits for it.
	Foreign []*rollout.Rollout
	// Payload is the config's bytes, or PayloadErr why they are not there.
	Payload    []byte
	PayloadErr error
	// Configs are the kubelet configs of the ConfigMaps the nodes report
	// active (rollout.Facts.Configs), which rollout.Plan compares the
	// config with to find the nodes to drain. The controller reads them
	// only when Decide plans a rollout (Output.Planned): nil, every node
	// counts as running the kubelet's defaults.
	Configs map[string]*kubeletconfigv1beta1.KubeletConfiguration
	Now     time.Time
}

// Output is what the controller does for the pool.
type Output struct {
	// Create is a rollout to create, or nil.
	Create *rollout.Rollout
	// Abort names rollouts of an older revision still under way: a new
	// revision supersedes them.
	Abort []string
	// Pause and Resume name the pool's rollouts whose spec.paused must
	// follow the pool's.
	Pause, Resume []string
	// Status is the pool's status to write.
	Status Status
	// Planned: Decide planned a rollout to create, or refused one for its
	// drains (rollout.Plan), and that depends on Input.Configs.
	Planned bool
	// Warnings are rollout.Plan's, for the controller's log.
	Warnings []string
	// Join are the nodes that registered with the startup taint
	// (source.StartupTaint) and do not hold the pool's current revision:
	// the controller assigns each JoinTarget pinned by JoinPin at once
	// (rollout.Assign), outside any rollout and its budget, since no
	// workload runs on them. Their agents remove the taint once the config
	// is active and passed its health gate.
	Join       []string
	JoinTarget *corev1.NodeConfigSource
	JoinPin    *source.Pin
}

// Decide returns what the controller does for in.Pool. It is a function of
// its input alone.
func Decide(in Input) Output {
	p := in.Pool
	out := Output{Status: Status{
		ObservedGeneration: p.Generation,
		Conditions:         slices.Clone(p.Status.Conditions),
		Revision:           p.Status.Revision,
		CurrentRollout:     p.Status.CurrentRollout,
		Digest:             p.Status.Digest,
	}}
	st := &out.Status
	target := p.Spec.ConfigSource.DeepCopy()

	selected, conflicts, err := selectNodes(p, in.Others, in.Nodes)
	if err != nil {
		return stalled(out, in.Now, ReasonInvalidSelector, err.Error())
	}
	if err := p.Spec.Strategy.Windows.Validate("spec.strategy.windows"); err != nil {
		return stalled(out, in.Now, ReasonInvalidWindow, err.Error())
	}
	if err := rollout.ValidatePauseOnAlerts(p.Spec.Strategy.PauseOnAlerts, "spec.strategy.pauseOnAlerts"); err != nil {
		return stalled(out, in.Now, ReasonInvalidPauseOnAlerts, err.Error())
	}
	st.Nodes.Conflicting = int32(len(conflicts))
	if len(conflicts) > 0 {
		st.ConflictingNodes = conflicts[:min(len(conflicts), maxConflictNames)]
	}

	if ns := target.ConfigMap.Namespace; ns != p.Namespace {
		return stalled(out, in.Now, ReasonConfigOutsideNamespace, fmt.Sprintf("spec.configSource names a ConfigMap in namespace %q: it must be in the pool's namespace %q, the config namespace whose ConfigMaps the agents read", ns, p.Namespace))
	}
	if in.PayloadErr != nil {
		return stalled(out, in.Now, ReasonConfigUnavailable, in.PayloadErr.Error())
	}
	pin := source.NewPin(target, in.Payload, p.Spec.AllowUnsafe)
	if p.Spec.Digest != "" && p.Spec.Digest != pin.Digest {
		return stalled(out, in.Now, ReasonDigestMismatch, fmt.Sprintf("configmap %s/%s holds %s under %q, not spec.digest %s: the ConfigMap changed, or spec.digest names other bytes",
			target.ConfigMap.Namespace, target.ConfigMap.Name, source.ShortDigest(pin.Digest), target.ConfigMap.KubeletConfigKey, source.ShortDigest(p.Spec.Digest)))
	}
	revs := Revisions(in.Rollouts)
	if made, ok := bytesFixed(p, revs, target); ok && made.Digest != pin.Digest {
		return stalled(out, in.Now, ReasonDigestMismatch, fmt.Sprintf("configmap %s/%s holds %s under %q, not %s, the bytes revision %d was made with: a ConfigMap edit reaches no node; review the new bytes and change the pool's spec to roll them out (set spec.digest to %s), or restore the old bytes",
			target.ConfigMap.Namespace, target.ConfigMap.Name, source.ShortDigest(pin.Digest), target.ConfigMap.KubeletConfigKey, source.ShortDigest(made.Digest), revs[len(revs)-1].Number, pin.Digest))
	}
	st.Digest = pin.Digest

	// Counts, and the nodes that do not hold the config yet; those that
	// joined with the startup taint are assigned outside the rollouts.
	var needs []corev1.Node
	var pending []*corev1.Node
	for _, n := range selected {
		o, err := rollout.Observe(n, target, pin)
		if err != nil {
			continue
		}
		st.Nodes.Selected++
		if o.Running {
			st.Nodes.Updated++
		}
		if o.Available() {
			st.Nodes.Available++
		}
		if o.Error != "" {
			st.Nodes.Failed++
		}
		switch {
		case source.Pending(n):
			pending = append(pending, n)
		case !o.Assigned:
			needs = append(needs, *n)
		}
	}
	// The revision: the newest rollout's, when it rolls this config out,
	// and then under the revision's own pin; else the next one.
	rev := int64(1)
	var current []*rollout.Rollout
	if len(revs) > 0 {
		newest := revs[len(revs)-1]
		rev = newest.Number
		if !sameConfig(newest.Rollouts[0], target, pin) {
			rev++
		} else {
			current = newest.Rollouts
			pin = newest.Rollouts[0].Spec.Pin.DeepCopy()
		}
	}
	st.Revision = rev

	// An older revision still under way is superseded; the pool's paused
	// flag governs the current one.
	for _, r := range revs {
		for _, ro := range r.Rollouts {
			state := ro.State()
			switch {
			case r.Number != rev && !state.Terminal():
				out.Abort = append(out.Abort, ro.Name)
			case r.Number == rev && p.Spec.Paused && state == rollout.Running:
				out.Pause = append(out.Pause, ro.Name)
			case r.Number == rev && !p.Spec.Paused && state == rollout.Paused:
				out.Resume = append(out.Resume, ro.Name)
			}
		}
	}

	var latest *rollout.Rollout
	if len(current) > 0 {
		latest = current[len(current)-1]
		st.CurrentRollout = latest.Name
	}
	if latest == nil || rolloutStalled[latest.State()] == "" {
		out.Join, out.JoinTarget, out.JoinPin = joining(pending, in.Foreign, target, pin), target, pin
	}
	switch {
	case latest != nil && latest.State() == rollout.Running && strings.HasPrefix(latest.Status.Reason, rollout.ReasonOutsideWindow):
		return reconciling(out, in.Now, ReasonOutsideWindow, fmt.Sprintf("rollout %s of revision %d: %d of %d nodes updated; %s", latest.Name, rev, st.Nodes.Updated, st.Nodes.Selected, latest.Status.Reason))
	case latest != nil && latest.State() == rollout.Running && strings.HasPrefix(latest.Status.Reason, ReasonAlertmanagerNotAllowed+":"):
		return stalled(out, in.Now, ReasonAlertmanagerNotAllowed, fmt.Sprintf("rollout %s of revision %d: %d of %d nodes updated; %s: name one of them in spec.strategy.pauseOnAlerts, or have the controller's --alertmanager-url list this one", latest.Name, rev, st.Nodes.Updated, st.Nodes.Selected, latest.Status.Reason))
	case latest != nil && latest.State() == rollout.Running && strings.HasPrefix(latest.Status.Reason, ReasonPausedOnAlert+":"):
		return reconciling(out, in.Now, ReasonPausedOnAlert, fmt.Sprintf("rollout %s of revision %d: %d of %d nodes updated; %s", latest.Name, rev, st.Nodes.Updated, st.Nodes.Selected, latest.Status.Reason))
	case latest != nil && latest.State() == rollout.Running && strings.HasPrefix(latest.Status.Reason, ReasonAlertsUnknown+":"):
		return reconciling(out, in.Now, ReasonAlertsUnknown, fmt.Sprintf("rollout %s of revision %d: %d of %d nodes updated; %s", latest.Name, rev, st.Nodes.Updated, st.Nodes.Selected, latest.Status.Reason))
	case latest != nil && !latest.State().Terminal():
		msg := fmt.Sprintf("rollout %s of revision %d: %d of %d nodes updated", latest.Name, rev, st.Nodes.Updated, st.Nodes.Selected)
		if latest.Status.Reason != "" {
			msg += "; " + latest.Status.Reason // what a node waits for
		}
		return reconciling(out, in.Now, ReasonRollingOut, msg)
	case latest != nil && rolloutStalled[latest.State()] != "" && generationOf(latest) >= p.Generation:
		return stalled(out, in.Now, rolloutStalled[latest.State()], fmt.Sprintf("rollout %s of revision %d is %s: %s; fix the config and change the pool's spec to roll out again, or undo it with kubectl dkc rollout undo %s",
			latest.Name, rev, latest.State(), orNone(latest.Status.Reason), latest.Name))
	}
	if len(needs) > 0 {
		req := request(p, rev, len(current), target, pin)
		// A node another pool selects too is not the pool's: the rollout
		// then lists the pool's nodes rather than cover its selector.
		req.BySelector = len(conflicts) == 0
		r, warnings, err := rollout.Plan(req, rollout.Facts{
			Nodes: needs, Payload: in.Payload, Configs: in.Configs, Rollouts: in.Foreign,
		})
		out.Warnings = warnings
		var (
			overlap      *rollout.OverlapError
			nodeSpecific *rollout.NodeSpecificError
			shadowed     *flagz.ShadowError
			drain        *rollout.DrainError
		)
		switch {
		case errors.As(err, &overlap):
			held := make([]string, len(overlap.Overlaps))
			for i, o := range overlap.Overlaps {
				held[i] = "node/" + o.Node + " (rollout " + o.Rollout + ")"
			}
			return reconciling(out, in.Now, ReasonWaitingForOtherRollouts, fmt.Sprintf("%d nodes wait for other rollouts to end: %s", len(held), strings.Join(held[:min(len(held), maxConflictNames)], ", ")))
		case p.Spec.Paused:
			n := len(needs)
			if r != nil && rollout.Lists(r) {
				n = len(r.Spec.Nodes)
			}
			return reconciling(out, in.Now, ReasonPaused, fmt.Sprintf("paused with %d of %d nodes not assigned revision %d", n, st.Nodes.Selected, rev))
		case errors.As(err, &nodeSpecific):
			return stalled(out, in.Now, ReasonNodeSpecificConfig, err.Error())
		case errors.As(err, &shadowed):
			return stalled(out, in.Now, ReasonShadowedByFlags, err.Error())
		case errors.As(err, &drain):
			out.Planned = true
			return stalled(out, in.Now, ReasonNeedsDrain, err.Error())
		case err != nil:
			return stalled(out, in.Now, ReasonConfigUnavailable, err.Error())
		}
		out.Planned = true
		out.Create = own(r, p, rev)
		st.CurrentRollout = r.Name
		return reconciling(out, in.Now, ReasonRollingOut, fmt.Sprintf("rollout %s of revision %d: %d nodes", r.Name, rev, len(needs)))
	}
	switch {
	case st.Nodes.Updated < st.Nodes.Selected:
		return reconciling(out, in.Now, ReasonApplying, fmt.Sprintf("%d of %d nodes run revision %d", st.Nodes.Updated, st.Nodes.Selected, rev))
	}
	return settle(out, in.Now, Ready, ReasonUpdated, fmt.Sprintf("%d nodes run revision %d", st.Nodes.Selected, rev))
}

// joining are the nodes among pending, which carry the startup taint, that
// do not hold target pinned by pin, and that no unfinished rollout of
// others covers: the rollout assigns those.
func joining(pending []*corev1.Node, others []*rollout.Rollout, target *corev1.NodeConfigSource, pin *source.Pin) []string {
	var candidates []*corev1.Node
	for _, n := range pending {
		if !source.Holds(n, target, pin) {
			candidates = append(candidates, n)
		}
	}
	busy := map[string]bool{}
	for _, o := range rollout.Overlaps(candidates, others, "") {
		busy[o.Node] = true
	}
	var out []string
	for _, n := range candidates {
		if !busy[n.Name] {
			out = append(out, n.Name)
		}
	}
	return out
}

// Unselected reports whether no pool of pools selects node: a node that
// registered with the startup taint and that no pool would configure has
// the taint removed at once. A pool whose selector does not parse might
// select any node: the taint stays until the selector is fixed (the pool
// is Stalled with InvalidSelector).
func Unselected(pools []*Pool, node *corev1.Node) bool {
	set := labels.Set(node.Labels)
	for _, p := range pools {
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.NodeSelector)
		if err != nil || sel.Matches(set) {
			return false
		}
	}
	return true
}

// selectNodes returns the nodes p's selector picks and no other pool's
// does, and the names of those another pool picks too.
func selectNodes(p *Pool, others []*Pool, nodes []*corev1.Node) ([]*corev1.Node, []string, error) {
	sel, err := metav1.LabelSelectorAsSelector(&p.Spec.NodeSelector)
	if err != nil {
		return nil, nil, fmt.Errorf("spec.nodeSelector: %w", err)
	}
	var otherSels []labels.Selector
	for _, o := range others {
		if o.Name == p.Name {
			continue
		}
		if s, err := metav1.LabelSelectorAsSelector(&o.Spec.NodeSelector); err == nil {
			otherSels = append(otherSels, s)
		}
	}
	var picked []*corev1.Node
	var conflicts []string
	for _, n := range nodes {
		set := labels.Set(n.Labels)
		if !sel.Matches(set) {
			continue
		}
		if slices.ContainsFunc(otherSels, func(s labels.Selector) bool { return s.Matches(set) }) {
			conflicts = append(conflicts, n.Name)
			continue
		}
		picked = append(picked, n)
	}
	slices.Sort(conflicts)
	return picked, conflicts, nil
}

// sameConfig reports whether r rolls out target pinned by pin.
func sameConfig(r *rollout.Rollout, target *corev1.NodeConfigSource, pin *source.Pin) bool {
	return source.Equal(r.Spec.Config, target) && r.Spec.Pin.Equal(pin)
}

// bytesFixed returns the pin of the newest revision when its bytes are the
// only ones the pool may roll out of target: the revision names target,
// spec.digest is unset (when set, it says which bytes), and the pool's spec
// is the one the revision was made for, or one the controller has already
// seen (status.observedGeneration). A revision records the digest it first
// read; only a change of the pool's spec takes other bytes into a new
// revision, as only a change of its template rolls a Deployment, never an
// edit of a ConfigMap it mounts.
func bytesFixed(p *Pool, revs []Revision, target *corev1.NodeConfigSource) (*source.Pin, bool) {
	if p.Spec.Digest != "" || len(revs) == 0 {
		return nil, false
	}
	newest := revs[len(revs)-1]
	first := newest.Rollouts[0]
	if first.Spec.Pin == nil || !source.Equal(first.Spec.Config, target) {
		return nil, false
	}
	made := int64(0)
	for _, r := range newest.Rollouts {
		made = max(made, generationOf(r))
	}
	if p.Generation > made && p.Generation > p.Status.ObservedGeneration {
		return nil, false
	}
	return first.Spec.Pin, true
}

func generationOf(r *rollout.Rollout) int64 {
	n, _ := strconv.ParseInt(r.Annotations[GenerationAnnotation], 10, 64)
	return n
}

// request is the rollout of revision rev of p's target, pinned by pin,
// under p's strategy, that follows earlier rollouts of the revision: a
// node another rollout covers waits for it.
func request(p *Pool, rev int64, earlier int, target *corev1.NodeConfigSource, pin *source.Pin) rollout.Request {
	s := p.Spec.Strategy
	req := rollout.Request{
		Namespace: p.Namespace, Name: RolloutName(p.Name, rev, earlier),
		Config: target, AllowUnsafe: p.Spec.AllowUnsafe, Pin: pin,
		Selector:       metav1.FormatLabelSelector(&p.Spec.NodeSelector),
		MaxUnavailable: s.MaxUnavailable, Soak: s.Soak.Duration, OrderByLabel: s.OrderByLabel,
		Drain:         s.Drain,
		Overlap:       rollout.WaitOnOverlap,
		Windows:       s.Windows,
		PauseOnAlerts: s.PauseOnAlerts,
	}
	if s.Canary != nil {
		req.Canary = ptr.To(int(*s.Canary))
	}
	if req.Selector == labels.Everything().String() {
		req.Selector = ""
	}
	return req
}

// own labels r as rollout rev of pool p, owned by p.
func own(r *rollout.Rollout, p *Pool, rev int64) *rollout.Rollout {
	r.Labels = map[string]string{Label: p.Name, RevisionLabel: strconv.FormatInt(rev, 10)}
	r.Annotations = map[string]string{GenerationAnnotation: strconv.FormatInt(p.Generation, 10)}
	r.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: Kind, Name: p.Name, UID: p.UID, Controller: ptr.To(true),
	}}
	return r
}

func orNone(s string) string {
	if s == "" {
		return "no reason recorded"
	}
	return s
}

// rolloutStalled is the reason of a pool stalled by its current rollout's
// state.
var rolloutStalled = map[rollout.State]string{rollout.Halted: ReasonRolloutHalted, rollout.Aborted: ReasonRolloutAborted}

// stalled sets the conditions of a pool that cannot go on by itself.
func stalled(out Output, now time.Time, reason, msg string) Output {
	return settle(out, now, Stalled, reason, msg)
}

// reconciling sets the conditions of a pool whose rollout is under way.
func reconciling(out Output, now time.Time, reason, msg string) Output {
	return settle(out, now, Reconciling, reason, msg)
}

// settle sets condition typ True with reason and msg, and the other two
// False: Ready with the same message (why the pool is not Ready), the last
// with none.
func settle(out Output, now time.Time, typ, reason, msg string) Output {
	for _, c := range []string{Ready, Reconciling, Stalled} {
		status, m := metav1.ConditionFalse, ""
		switch {
		case c == typ:
			status, m = metav1.ConditionTrue, msg
		case c == Ready:
			m = msg
		}
		setCondition(&out.Status, c, status, reason, m, out.Status.ObservedGeneration, now)
	}
	return out
}

// setCondition sets condition typ, keeping its transition time when its
// status does not change.
func setCondition(st *Status, typ string, status metav1.ConditionStatus, reason, msg string, generation int64, now time.Time) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now),
	})
}
