package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// Reasons of the source.ConditionType condition, which shows the agent's
// state in `kubectl describe node`. Applied, RolledBack, Refused,
// PinMismatch, Reset, Drift and Failed are also the reasons of the Events
// the agent records on the Node (Failed only for a download failure, once
// per distinct error).
const (
	// ReasonApplied (True): the kubelet runs the assigned config, and it is
	// the last-known-good config.
	ReasonApplied = "Applied"
	// ReasonVerifying (Unknown): the kubelet runs the assigned config (its
	// configz shows it, its healthz passes) and the status names it as
	// active, but the health gate still waits for a Ready from the
	// restarted kubelet; it ends in Trial or Applied, or in RolledBack.
	ReasonVerifying = source.ReasonVerifying
	// ReasonTrial (True): the kubelet runs the assigned config and passed
	// the health gate; it becomes last-known-good when --trial-duration
	// passes.
	ReasonTrial = "Trial"
	// ReasonRolledBack (False): the kubelet failed the health gate on the
	// assigned config and runs the last-known-good config again.
	ReasonRolledBack = "RolledBack"
	// ReasonRefused (False): the assigned config failed to load or
	// validate, or makes an unsafe change that its assignment does not
	// allow (kubectl dkc assign --allow-unsafe); the kubelet was not
	// touched.
	ReasonRefused = "Refused"
	// ReasonPinMismatch (False): the assigned ConfigMap's bytes are not the
	// ones the assignment pins (the ConfigMap changed after it was
	// assigned), or the assignment has no pin; status.error names both
	// digests. The kubelet was not touched; assigning again pins the new
	// bytes.
	ReasonPinMismatch = "PinMismatch"
	// ReasonFailed (False): the agent could not download the assigned
	// config (the ConfigMap does not exist, or the agent may not read it:
	// status.error says which; the kubelet and the store are untouched) or
	// act on it (an API, disk or restart failure); it retries.
	ReasonFailed = "Failed"
	// ReasonReset (True): the assignment was removed and the kubelet runs
	// the node's local config.
	ReasonReset = "Reset"
	// ReasonLocal (True): nothing is assigned and the kubelet runs its
	// local config, as it did before the agent started: the agent's first
	// report on a node, so that the node shows an agent before its first
	// assignment.
	ReasonLocal = "Local"
	// ReasonDrift (False): the kubelet's config file or drop-in holds bytes
	// the agent never wrote (something else rewrote it); --on-drift says
	// whether the agent puts its config back.
	ReasonDrift = "Drift"
)

// ReasonIgnoredAnnotation is the reason of the Warning Event the agent
// records when the assigned ConfigMap carries source.AllowUnsafeAnnotation,
// which it does not honour; it is never a condition reason.
const ReasonIgnoredAnnotation = "IgnoredAnnotation"

// ConditionReasons are the reasons of the source.ConditionType condition,
// and EventReasons those of the Events the agent records on the Node. The
// docs list them (docs/agent.md, docs/carrier.md), and cmd/docs_test.go
// holds the docs to these lists; a new reason goes in one of them.
var (
	ConditionReasons = []string{
		ReasonApplied, ReasonVerifying, ReasonTrial, ReasonRolledBack, ReasonRefused, ReasonPinMismatch,
		ReasonFailed, ReasonReset, ReasonLocal, ReasonDrift, ReasonUnconfined,
	}
	EventReasons = []string{
		ReasonApplied, ReasonReset, ReasonRefused, ReasonPinMismatch, ReasonIgnoredAnnotation,
		ReasonRolledBack, ReasonDrift, ReasonFailed, ReasonUnconfined, ReasonProbePodUnavailable,
	}
)

// report is what a sync publishes on the Node: one patch of nodes/status
// (when anything differs), then its Events.
type report struct {
	// carrier holds the status; ignored when status is nil.
	carrier source.Carrier
	// status is the NodeConfigStatus; nil clears it from both carriers
	// unless keepStatus is set.
	status     *corev1.NodeConfigStatus
	keepStatus bool
	// reason and message set the condition; an empty reason leaves it.
	reason, message string
	// events are recorded on the Node, in order, after the patch.
	events []event
	// history is appended, in order, to source.HistoryAnnotation in the
	// same patch as the status (Time is set on publish); an entry equal to
	// the one before it (but for its time) is not appended again.
	history []source.HistoryEntry
}

// event is an Event on the Node: its reason, and its message (default: the
// report's message). Its type is Warning for the reasons whose condition
// would be False, else Normal.
type event struct {
	reason, message string
}

// after returns r with first's Events and history entries before r's own:
// the report of a sync that did two things (drift seen, then reasserted).
func (r report) after(first report) report {
	events := make([]event, 0, len(first.events)+len(r.events))
	for _, e := range first.events {
		if e.message == "" {
			e.message = first.message
		}
		events = append(events, e)
	}
	r.events = append(events, r.events...)
	r.history = append(append([]source.HistoryEntry(nil), first.history...), r.history...)
	return r
}

// ConditionStatus is the status of the source.ConditionType condition with
// reason: True for the reasons where the kubelet runs the config it was
// asked to run, Unknown while the health gate still waits, else False. An
// Event with a reason whose condition would be False is a Warning.
func ConditionStatus(reason string) corev1.ConditionStatus {
	switch reason {
	case ReasonApplied, ReasonTrial, ReasonReset, ReasonLocal:
		return corev1.ConditionTrue
	case ReasonVerifying:
		return corev1.ConditionUnknown
	}
	return corev1.ConditionFalse
}

// publish writes r to the Node: the status through its carrier and the
// condition through nodes/status, each only when it differs from what node
// shows, so that the agent's own writes do not make it loop; then the Event.
// node is updated to what the apiserver returned: it must be the sync's own
// copy, never an informer's cached object.
func (a *Agent) publish(ctx context.Context, node *corev1.Node, r report) error {
	logger := klog.FromContext(ctx)
	began := a.Clock.Now()
	defer func() { a.Metrics.PhaseDuration.WithLabelValues(PhaseReport).Observe(a.Clock.Since(began).Seconds()) }()
	r = r.bounded()

	cur, curCarrier, err := source.Status(node)
	if err != nil {
		logger.Info("Replacing an unreadable config status", "err", err)
		cur = nil
	}
	statusChanged := !r.keepStatus && !apiequality.Semantic.DeepEqual(cur, r.status) || (r.status != nil && curCarrier != r.carrier)
	if judged, err := source.JudgedPin(node); err == nil && !judged.Equal(a.judging) && r.status != nil && r.carrier == source.Annotation {
		// The same verdict on other pinned bytes is news to a waiter.
		statusChanged = !r.keepStatus
	}
	history, err := a.history(ctx, node, r.history)
	if err != nil {
		return err
	}
	// One patch of nodes/status carries the status, the history and the
	// condition, so that no reader sees one without the others (such as a
	// new active next to the verdict of an earlier apply), in one request.
	var parts [][]byte
	if statusChanged || history != "" {
		c := r.carrier
		if r.status == nil {
			c = source.Annotation // a nil status clears both carriers
		}
		st := r.status
		if r.keepStatus {
			st = cur
		}
		patch, err := source.StatusPatch(c, st, a.judging)
		if err != nil {
			return fmt.Errorf("status patch: %w", err)
		}
		parts = append(parts, patch)
		if history != "" {
			annotation, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{source.HistoryAnnotation: history}}})
			if err != nil {
				return fmt.Errorf("status patch: %w", err)
			}
			parts = append(parts, annotation)
		}
	}
	if cond, ok := a.conditionChange(node, r); ok {
		patch, err := source.ConditionPatch(cond)
		if err != nil {
			return fmt.Errorf("condition patch: %w", err)
		}
		parts = append(parts, patch)
	}
	if len(parts) > 0 {
		patch, err := mergePatches(parts...)
		if err != nil {
			return fmt.Errorf("status patch: %w", err)
		}
		// A strategic merge patch: the condition merges into
		// status.conditions by type; the status fields have no lists, so
		// they merge as a JSON merge patch would.
		updated, err := a.Client.Nodes().Patch(ctx, node.Name, types.StrategicMergePatchType, patch,
			metav1.PatchOptions{FieldManager: source.FieldManager}, "status")
		if err != nil {
			return fmt.Errorf("patch node %q status: %w", node.Name, err)
		}
		*node = *updated // a later publish in this sync compares with what it wrote
		logger.V(2).Info("Reported config status", "status", r.status, "reason", r.reason)
	}

	for _, e := range r.events {
		if a.Recorder == nil {
			break
		}
		eventType := corev1.EventTypeNormal
		if ConditionStatus(e.reason) == corev1.ConditionFalse {
			eventType = corev1.EventTypeWarning
		}
		msg := e.message
		if msg == "" {
			msg = r.message
		}
		a.Recorder.Event(nodeRef(node), eventType, e.reason, msg)
	}
	return nil
}

// bounded returns r with every message it reports (the status error, the
// condition, the Events, the history) shortened to
// kubeletconfig.MaxMessageBytes, so that a report of any size fits in the
// Node's annotations and reaches the reader: the lists in the messages are
// bounded where they are built (kubeletconfig.JoinBounded); this is the
// bound on the whole message, whatever built it.
func (r report) bounded() report {
	short := func(s string) string { return kubeletconfig.Shorten(s, kubeletconfig.MaxMessageBytes) }
	r.message = short(r.message)
	if r.status != nil && len(r.status.Error) > kubeletconfig.MaxMessageBytes {
		r.status = r.status.DeepCopy()
		r.status.Error = short(r.status.Error)
	}
	events := make([]event, len(r.events))
	for i, e := range r.events {
		events[i] = event{reason: e.reason, message: short(e.message)}
	}
	r.events = events
	history := make([]source.HistoryEntry, len(r.history))
	for i, h := range r.history {
		h.Message = short(h.Message)
		history[i] = h
	}
	r.history = history
	return r
}

// nodeRef is the reference of the Events the agent records on node.
func nodeRef(node *corev1.Node) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node.Name, UID: node.UID}
}

// conditionChange returns r's condition, with its times, when it differs
// from node's; an empty reason leaves the condition as it is.
func (a *Agent) conditionChange(node *corev1.Node, r report) (corev1.NodeCondition, bool) {
	if r.reason == "" {
		return corev1.NodeCondition{}, false
	}
	want := corev1.NodeCondition{Type: source.ConditionType, Status: ConditionStatus(r.reason), Reason: r.reason, Message: r.message}
	if old := source.Condition(node.Status.Conditions); old != nil && old.Status == want.Status && old.Reason == want.Reason && old.Message == want.Message {
		return corev1.NodeCondition{}, false
	}
	now := metav1.NewTime(a.Clock.Now().Truncate(time.Second))
	for _, c := range source.SetCondition(node.Status.Conditions, want, now) {
		if c.Type == source.ConditionType {
			want = c
		}
	}
	return want, true
}

// mergePatches merges JSON objects into one, key by key; a key that two
// of them set to something other than objects takes the last one's value.
func mergePatches(parts ...[]byte) ([]byte, error) {
	merged := map[string]any{}
	for _, p := range parts {
		var m map[string]any
		if err := json.Unmarshal(p, &m); err != nil {
			return nil, err
		}
		mergeInto(merged, m)
	}
	return json.Marshal(merged)
}

func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		sv, ok := v.(map[string]any)
		dv, ok2 := dst[k].(map[string]any)
		if ok && ok2 {
			mergeInto(dv, sv)
			continue
		}
		dst[k] = v
	}
}

// history returns the value of node's history annotation with entries
// appended, each unless it repeats the entry before it, or "" when none is.
func (a *Agent) history(ctx context.Context, node *corev1.Node, entries []source.HistoryEntry) (string, error) {
	if len(entries) == 0 {
		return "", nil
	}
	h, err := source.History(node)
	if err != nil {
		klog.FromContext(ctx).Info("Replacing an unreadable config history", "err", err)
		h = nil
	}
	appended := false
	for _, e := range entries {
		if n := len(h); n > 0 {
			last := h[n-1]
			if last.Result == e.Result && last.Message == e.Message && source.Equal(last.Source, e.Source) {
				continue
			}
		}
		e.Time = metav1.NewTime(a.Clock.Now().Truncate(time.Second))
		h = source.AppendHistory(h, e)
		appended = true
	}
	if !appended {
		return "", nil
	}
	return source.HistoryValue(h)
}

// statusCarrier is where the status of an assignment held by c goes: the
// native status.config next to a native spec.configSource, else the
// annotation.
func statusCarrier(c source.Carrier) source.Carrier {
	if c == source.Native {
		return source.Native
	}
	return source.Annotation
}

// describe names a config source in messages.
func describe(src *corev1.NodeConfigSource) string {
	if src == nil || src.ConfigMap == nil {
		return "the local config"
	}
	cm := src.ConfigMap
	s := fmt.Sprintf("ConfigMap %s/%s key %q", cm.Namespace, cm.Name, cm.KubeletConfigKey)
	if cm.ResourceVersion != "" {
		s += fmt.Sprintf(" (resourceVersion %s)", cm.ResourceVersion)
	}
	return s
}
