package agent

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-dkc/dkc/pkg/checkpoint"
	"github.com/kubectl-dkc/dkc/pkg/nodehealth"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/pkg/status"
)

// The decision table: what a sync does for each state of the record, the
// assignment, the ConfigMap, the kubelet's config and the agent's memory.
// Each row builds what observe would have seen and reads decide's answer as
// a plan: the step, what is reported, what is checked, what is remembered.

// plan is a decision as a reader states it.
type plan struct {
	Step string
	// Report is what a report-only step or a reset reports; First is what
	// is reported before the step's own report, in the same patch.
	Report, First *reported
	// Err is the sync's error after the step.
	Err string
	// Do lists what the step does besides: "checkpoint" (saves the
	// assignment's checkpoint again first), "verify", "trial check",
	// "report failure".
	Do []string
	// Memory lists how the agent's memory and metrics change.
	Memory []string
}

// reported is a report as "Reason", its status as names ("-": none), its
// Events' reasons and its history as "Result name".
type reported struct {
	Condition string
	Status    string
	Events    []string
	History   []string
}

func planOf(d decision) plan {
	p := plan{Step: d.step.String()}
	if d.step == stepReport || d.step == stepReset {
		p.Report = reportedOf(d.report)
	}
	if d.first != nil {
		p.First = reportedOf(*d.first)
	}
	if d.err != nil {
		p.Err = d.err.Error()
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{d.checkpoint, "checkpoint"}, {d.verify, "verify"}, {d.trialCheck, "trial check"}, {d.reportFailure, "report failure"}} {
		if f.on {
			p.Do = append(p.Do, f.name)
		}
	}
	m := d.memo
	for _, f := range []struct {
		on   bool
		name string
	}{
		{m.forgetAssignment, "forget the assignment"},
		{m.forgetDownload, "forget the download failure"},
		{m.forgetDrift, "forget the drift"},
		{m.refuse != nil, "remember the refusal"},
		{m.downloadFailed != "", "remember the download failure"},
		{m.drifted != "", "remember the drift"},
		{m.warned != "", "remember the warning"},
		{m.count != "", "count " + m.count},
		{m.drift, "count a drift"},
	} {
		if f.on {
			p.Memory = append(p.Memory, f.name)
		}
	}
	return p
}

func reportedOf(r report) *reported {
	out := &reported{Condition: r.reason, Status: "-"}
	switch {
	case r.keepStatus:
		out.Status = "kept"
	case r.status != nil:
		s := r.status
		out.Status = fmt.Sprintf("assigned %s, active %s, lastKnownGood %s", nameOf(s.Assigned), nameOf(s.Active), nameOf(s.LastKnownGood))
		if s.Error != "" {
			out.Status += ", error"
		}
	}
	for _, e := range r.events {
		out.Events = append(out.Events, e.reason)
	}
	for _, h := range r.history {
		out.History = append(out.History, h.Result+" "+nameOf(h.Source))
	}
	return out
}

func nameOf(src *corev1.NodeConfigSource) string {
	if src == nil || src.ConfigMap == nil {
		return "-"
	}
	return src.ConfigMap.Name
}

// seeing builds what observe sees: by default a node never assigned
// anything, its kubelet on the local config, nothing recorded.
func seeing(opts ...func(*observed)) *observed {
	o := &observed{carrier: source.Annotation, onDrift: DriftReport, file: observation{effective: []byte(local)}, fileHash: "local"}
	for _, f := range opts {
		f(o)
	}
	return o
}

// assignedTo: the node is assigned ConfigMap name, pinned to pinned
// (allowing allowUnsafe), which holds payload now under annotations; the
// payload is checked against the pin as observe checks it.
func assignedTo(name, pinned, payload string, annotations map[string]string) func(*observed) {
	return func(o *observed) {
		o.assigned = &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: name, KubeletConfigKey: "kubelet"}}
		o.cmName = "kube-system/" + name
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1", Annotations: annotations},
			Data: map[string]string{"kubelet": payload}}
		o.as = assignment{src: ref(name, "1"), cm: cm}
		if pinned != "" {
			o.pin = source.NewPin(o.assigned, []byte(pinned), nil)
		}
		o.as.pin = o.pin
		o.as.payload, o.payloadErr = (&Agent{NodeName: nodeName}).pinned(o.as)
	}
}

// assigned: the node is assigned ConfigMap name, pinned to its bytes.
func assigned(name string) func(*observed) { return assignedTo(name, cfgA, cfgA, nil) }

func configMapErr(err error) func(*observed) {
	return func(o *observed) {
		assigned("a")(o)
		o.cmErr, o.as, o.payloadErr = err, assignment{}, nil
	}
}

func recorded(st checkpoint.State) func(*observed) { return func(o *observed) { o.st = st } }

var (
	started  = t0
	baseline = &nodehealth.Baseline{Taken: t0}
)

// inTrial: name is assigned and in its trial, over lkg ("": none).
func inTrial(name, lkg string) checkpoint.State {
	st := checkpoint.State{Assigned: ref(name, "1"), Active: ref(name, "1"), AssignedAt: &started, Baseline: baseline}
	if lkg != "" {
		st.LastKnownGood = ref(lkg, "1")
	}
	return st
}

// promoted: name is assigned and last-known-good.
func promoted(name string) checkpoint.State {
	return checkpoint.State{Assigned: ref(name, "1"), Active: ref(name, "1"), LastKnownGood: ref(name, "1"), AssignedAt: &started}
}

// failed: name failed its gate and lkg is back.
func failed(name, lkg string) checkpoint.State {
	return checkpoint.State{Assigned: ref(name, "1"), Active: ref(lkg, "1"), LastKnownGood: ref(lkg, "1"), AssignedAt: &started,
		Error: "failed to validate config, see Kubelet log for details: kubelet failed the health gate", ErrorSource: ref(name, "1")}
}

// fileHolds: the kubelet's config holds src's bytes (nil: the local config).
func fileHolds(src *corev1.NodeConfigSource) func(*observed) {
	return func(o *observed) { o.file = observation{effective: []byte("{}"), source: src} }
}

// fileDrifted: the kubelet's config holds bytes the agent never wrote.
func fileDrifted(o *observed) {
	o.file, o.fileHash = observation{effective: []byte(`{"maxPods":77}`), drift: true}, "foreign"
}

var errUnreadable = errors.New("read kubelet config: input/output error")

func fileUnreadable(o *observed) { o.file, o.fileHash = observation{err: errUnreadable}, "" }

func onDrift(mode string) func(*observed) { return func(o *observed) { o.onDrift = mode } }

func TestDecide(t *testing.T) {
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "a")
	forbidden := &listError{err: apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "a", errors.New("no RBAC"))}
	notFoundMsg := downloadError("configmap kube-system/a not found").msg
	refusedBefore := &configError{reason: ReasonRefused, msg: "failed to validate config, see Kubelet log for details: refused unsafe change"}

	tests := map[string]struct {
		o    *observed
		want plan
		// message is part of the condition message of what is reported.
		message string
	}{
		// Without an assignment.
		"a node never assigned anything reports Local and touches nothing": {
			o: seeing(),
			want: plan{Step: "report", Report: &reported{Condition: ReasonLocal, Status: "-"},
				Memory: []string{"forget the assignment"}},
		},
		"a node whose condition shows an earlier assignment, with nothing left, reports Reset without an Event": {
			o: seeing(func(o *observed) { o.hasCondition = true }),
			want: plan{Step: "report", Report: &reported{Condition: ReasonReset, Status: "-"},
				Memory: []string{"forget the assignment"}},
		},
		"a removed assignment puts the local config back, with an Event and a history entry": {
			o: seeing(recorded(promoted("a")), fileHolds(ref("a", "1"))),
			want: plan{Step: "reset", Report: &reported{Condition: ReasonReset, Status: "-", Events: []string{ReasonReset}, History: []string{"Reset -"}},
				Memory: []string{"forget the assignment"}},
		},
		"a kubelet on a config dkc wrote, with the record lost, is reset too": {
			o: seeing(fileHolds(ref("a", "1"))),
			want: plan{Step: "reset", Report: &reported{Condition: ReasonReset, Status: "-", Events: []string{ReasonReset}, History: []string{"Reset -"}},
				Memory: []string{"forget the assignment"}},
		},
		"bytes no one assigned, on a node never assigned anything, are the operator's: left alone": {
			o: seeing(fileDrifted),
			want: plan{Step: "report", Report: &reported{Condition: ReasonLocal, Status: "-"},
				Memory: []string{"forget the assignment"}},
		},
		"bytes no one assigned, with only the config last written recorded (a reset stopped half-way), are left alone": {
			o: seeing(recorded(checkpoint.State{Active: ref("a", "1")}), fileDrifted),
			want: plan{Step: "report", Report: &reported{Condition: ReasonLocal, Status: "-"},
				Memory: []string{"forget the assignment"}},
		},
		"... and reset with --on-drift=reassert": {
			o: seeing(recorded(checkpoint.State{Active: ref("a", "1")}), fileDrifted, onDrift(DriftReassert)),
			want: plan{Step: "reset", Report: &reported{Condition: ReasonReset, Status: "-", Events: []string{ReasonReset}, History: []string{"Reset -"}},
				Memory: []string{"forget the assignment"}},
		},
		"an unreadable kubelet config without an assignment fails the sync, reporting nothing": {
			o:    seeing(recorded(promoted("a")), fileUnreadable),
			want: plan{Step: "none", Err: errUnreadable.Error(), Memory: []string{"forget the assignment"}},
		},

		// An assignment the agent cannot act on: reported, the kubelet
		// untouched.
		"an invalid assignment is reported as an internal error, with the recorded assignment": {
			o:       seeing(recorded(promoted("a")), fileHolds(ref("a", "1")), func(o *observed) { o.assignErr = errors.New("both carriers disagree") }),
			want:    plan{Step: "report", Report: &reported{Condition: ReasonFailed, Status: "assigned a, active a, lastKnownGood a, error"}},
			message: status.SyncErrorPrefix + status.InternalError + ": both carriers disagree",
		},
		"an assignment with no config source subfield is reported as upstream words it": {
			o:       seeing(func(o *observed) { o.assignErr = source.ErrAllNilSubfields }),
			want:    plan{Step: "report", Report: &reported{Condition: ReasonFailed, Status: "assigned -, active -, lastKnownGood -, error"}},
			message: status.SyncErrorPrefix + source.ErrAllNilSubfields.Error(),
		},
		"a ConfigMap whose informer has not listed yet waits, reporting nothing": {
			o:    seeing(configMapErr(errNotSynced)),
			want: plan{Step: "none"},
		},
		"a ConfigMap that does not exist is reported with an Event and counted, the kubelet untouched": {
			o: seeing(recorded(promoted("b")), fileHolds(ref("b", "1")), configMapErr(notFound)),
			want: plan{Step: "report", Report: &reported{Condition: ReasonFailed, Status: "assigned b, active b, lastKnownGood b, error", Events: []string{ReasonFailed}},
				Memory: []string{"remember the download failure", "count failed"}},
			message: notFoundMsg,
		},
		"the same download failure again keeps the status, without an Event": {
			o: seeing(configMapErr(notFound), func(o *observed) { o.downloadFailed = notFoundMsg }),
			want: plan{Step: "report", Report: &reported{Condition: ReasonFailed, Status: "assigned -, active -, lastKnownGood -, error"},
				Memory: []string{"remember the download failure"}},
		},
		"a ConfigMap the agent may not list is reported in the apiserver's words": {
			o: seeing(configMapErr(forbidden)),
			want: plan{Step: "report", Report: &reported{Condition: ReasonFailed, Status: "assigned -, active -, lastKnownGood -, error", Events: []string{ReasonFailed}},
				Memory: []string{"remember the download failure", "count failed"}},
			message: `configmaps "a" is forbidden: no RBAC`,
		},
		"another failure to get the ConfigMap fails the sync, reporting nothing": {
			o:    seeing(configMapErr(errors.New("connection refused"))),
			want: plan{Step: "none", Err: "get configmap kube-system/a: connection refused"},
		},
		"an unreadable pin is reported as an internal error": {
			o: seeing(assigned("a"), func(o *observed) {
				o.pin, o.as.pin, o.as.payload, o.pinErr = nil, nil, nil, errors.New("decode pin: bad json")
			}),
			want: plan{Step: "report", Report: &reported{Condition: ReasonFailed, Status: "assigned a, active -, lastKnownGood -, error"},
				Memory: []string{"forget the download failure"}},
			message: "decode pin: bad json",
		},
		"an edited ConfigMap under a pinned assignment is reported, naming both digests, the kubelet untouched": {
			o: seeing(recorded(promoted("a")), fileHolds(ref("a", "1")), assignedTo("b", cfgA, cfgB, nil)),
			want: plan{Step: "report", Report: &reported{Condition: ReasonPinMismatch, Status: "assigned b, active a, lastKnownGood a, error", Events: []string{ReasonPinMismatch}, History: []string{"Refused b"}},
				Memory: []string{"forget the download failure", "remember the refusal", "count refused"}},
			message: "holds bytes with digest " + source.Digest([]byte(cfgB)) + ", but the assignment pins " + source.Digest([]byte(cfgA)),
		},
		"an assignment without a pin is refused as a pin mismatch": {
			o: seeing(assignedTo("a", "", cfgA, nil)),
			want: plan{Step: "report", Report: &reported{Condition: ReasonPinMismatch, Status: "assigned a, active -, lastKnownGood -, error", Events: []string{ReasonPinMismatch}, History: []string{"Refused a"}},
				Memory: []string{"forget the download failure", "remember the refusal", "count refused"}},
			message: "is not pinned",
		},
		"a ConfigMap without the assigned key is refused": {
			o: seeing(assignedTo("a", cfgA, cfgA, nil), func(o *observed) {
				o.as.cm.Data = map[string]string{"other": cfgA}
				o.as.payload, o.payloadErr = (&Agent{}).pinned(o.as)
			}),
			want: plan{Step: "report", Report: &reported{Condition: ReasonRefused, Status: "assigned a, active -, lastKnownGood -, error", Events: []string{ReasonRefused}, History: []string{"Refused a"}},
				Memory: []string{"forget the download failure", "remember the refusal", "count refused"}},
		},
		"a config refused before, with the same ConfigMap and pin, is reported again without an Event and not checked again": {
			o: seeing(assigned("a"), func(o *observed) { o.refused = refusedBefore }),
			want: plan{Step: "report", Report: &reported{Condition: ReasonRefused, Status: "assigned a, active -, lastKnownGood -, error"},
				Memory: []string{"forget the download failure"}},
			message: refusedBefore.msg,
		},

		// A new assignment.
		"a new assignment is applied (checked, checkpointed, committed, restarted, gated)": {
			o:    seeing(assigned("a")),
			want: plan{Step: "apply", Do: []string{"report failure"}, Memory: []string{"forget the download failure"}},
		},
		"a new assignment over a config in trial is applied": {
			o:    seeing(recorded(inTrial("b", "")), fileHolds(ref("b", "1")), assigned("a")),
			want: plan{Step: "apply", Do: []string{"report failure"}, Memory: []string{"forget the download failure"}},
		},
		"a new assignment over a failed one is applied, whatever the kubelet's config holds": {
			o:    seeing(recorded(failed("b", "c")), fileDrifted, assigned("a")),
			want: plan{Step: "apply", Do: []string{"report failure"}, Memory: []string{"forget the download failure"}},
		},
		"a ConfigMap that carries the allow-unsafe annotation is warned about, then applied without it": {
			o: seeing(assignedTo("a", cfgA, cfgA, map[string]string{source.AllowUnsafeAnnotation: "*"})),
			want: plan{Step: "apply", First: &reported{Status: "kept", Events: []string{ReasonIgnoredAnnotation}}, Do: []string{"report failure"},
				Memory: []string{"forget the download failure", "remember the warning"}},
		},
		"the version of a ConfigMap warned about before is not warned about again": {
			o:    seeing(assignedTo("a", cfgA, cfgA, map[string]string{source.AllowUnsafeAnnotation: "*"}), func(o *observed) { o.warnedAnnotation = "uid-a/1" }),
			want: plan{Step: "apply", Do: []string{"report failure"}, Memory: []string{"forget the download failure"}},
		},

		// The recorded assignment: the kubelet's config file wins over the
		// record.
		"the last-known-good config on the kubelet is kept and reported": {
			o: seeing(recorded(promoted("a")), fileHolds(ref("a", "1")), assigned("a")),
			want: plan{Step: "settle", Do: []string{"checkpoint", "report failure"},
				Memory: []string{"forget the download failure", "forget the drift"}},
		},
		"a config in trial on the kubelet is held to its baseline": {
			o: seeing(recorded(inTrial("a", "")), fileHolds(ref("a", "1")), assigned("a")),
			want: plan{Step: "settle", Do: []string{"checkpoint", "trial check", "report failure"},
				Memory: []string{"forget the download failure", "forget the drift"}},
		},
		"a config in trial is gated on the kubelet's health once after the agent started; the next sync checks its trial, on a fresher Node": {
			o: seeing(recorded(inTrial("a", "b")), fileHolds(ref("a", "1")), assigned("a"), func(o *observed) { o.verifyPending = true }),
			want: plan{Step: "settle", Do: []string{"checkpoint", "verify", "report failure"},
				Memory: []string{"forget the download failure", "forget the drift"}},
		},
		"a last-known-good config is not gated again after the agent started": {
			o: seeing(recorded(promoted("a")), fileHolds(ref("a", "1")), assigned("a"), func(o *observed) { o.verifyPending = true }),
			want: plan{Step: "settle", Do: []string{"checkpoint", "report failure"},
				Memory: []string{"forget the download failure", "forget the drift"}},
		},
		"a failed config, with the kubelet back on the last-known-good one, is reported as rolled back": {
			o: seeing(recorded(failed("a", "b")), fileHolds(ref("b", "1")), assigned("a")),
			want: plan{Step: "report", Report: &reported{Condition: ReasonRolledBack, Status: "assigned a, active b, lastKnownGood b, error"},
				Do: []string{"checkpoint", "report failure"}, Memory: []string{"forget the download failure", "forget the drift"}},
		},
		"a failed config still on the kubelet (a rollback stopped half-way) is rolled back again": {
			o: seeing(recorded(failed("a", "b")), fileHolds(ref("a", "1")), assigned("a")),
			want: plan{Step: "restore", Do: []string{"checkpoint", "report failure"},
				Memory: []string{"forget the download failure", "forget the drift"}},
		},
		"a config the agent wrote that is not the target (the last-known-good one, put back by hand) is repaired through an apply": {
			o: seeing(recorded(inTrial("a", "b")), fileHolds(ref("b", "1")), assigned("a")),
			want: plan{Step: "apply", Do: []string{"checkpoint", "report failure"},
				Memory: []string{"forget the download failure", "forget the drift"}},
		},
		"the local config under a recorded assignment (a startup fallback) is repaired through an apply": {
			o: seeing(recorded(inTrial("a", "")), fileHolds(nil), assigned("a")),
			want: plan{Step: "apply", Do: []string{"checkpoint", "report failure"},
				Memory: []string{"forget the download failure", "forget the drift"}},
		},
		"drift is reported with an Event and a history entry, and counted, the kubelet untouched": {
			o: seeing(recorded(promoted("a")), fileDrifted, assigned("a")),
			want: plan{Step: "report", Report: &reported{Condition: ReasonDrift, Status: "assigned a, active -, lastKnownGood a, error", Events: []string{ReasonDrift}, History: []string{"Drift a"}},
				Do:     []string{"checkpoint", "report failure"},
				Memory: []string{"forget the download failure", "remember the drift", "count a drift"}},
			message: "kubelet config drifted",
		},
		"the same drift again keeps the report, without an Event": {
			o: seeing(recorded(promoted("a")), fileDrifted, assigned("a"), func(o *observed) { o.drifted = "foreign" }),
			want: plan{Step: "report", Report: &reported{Condition: ReasonDrift, Status: "assigned a, active -, lastKnownGood a, error"},
				Do: []string{"checkpoint", "report failure"}, Memory: []string{"forget the download failure", "remember the drift"}},
		},
		"drift with --on-drift=reassert is reported first, then the assigned config goes back through an apply": {
			o: seeing(recorded(promoted("a")), fileDrifted, assigned("a"), onDrift(DriftReassert)),
			want: plan{Step: "apply", First: &reported{Condition: ReasonDrift, Status: "assigned a, active -, lastKnownGood a, error", Events: []string{ReasonDrift}, History: []string{"Drift a"}},
				Do:     []string{"checkpoint", "report failure"},
				Memory: []string{"forget the download failure", "remember the drift", "count a drift"}},
		},
		"drift with --on-drift=reassert under a failed config puts the last-known-good one back": {
			o: seeing(recorded(failed("a", "b")), fileDrifted, assigned("a"), onDrift(DriftReassert)),
			want: plan{Step: "restore", First: &reported{Condition: ReasonDrift, Status: "assigned a, active -, lastKnownGood b, error", Events: []string{ReasonDrift}, History: []string{"Drift b"}},
				Do:     []string{"checkpoint", "report failure"},
				Memory: []string{"forget the download failure", "remember the drift", "count a drift"}},
		},
		"a warning about the ConfigMap comes before the drift it is reported with": {
			o: seeing(recorded(promoted("a")), fileDrifted, onDrift(DriftReassert), assignedTo("a", cfgA, cfgA, map[string]string{source.AllowUnsafeAnnotation: "*"})),
			want: plan{Step: "apply", First: &reported{Condition: ReasonDrift, Status: "assigned a, active -, lastKnownGood a, error", Events: []string{ReasonIgnoredAnnotation, ReasonDrift}, History: []string{"Drift a"}},
				Do:     []string{"checkpoint", "report failure"},
				Memory: []string{"forget the download failure", "remember the drift", "remember the warning", "count a drift"}},
		},
		"an unreadable kubelet config under the recorded assignment fails the sync, reported with what is known": {
			o: seeing(recorded(promoted("a")), fileUnreadable, assigned("a")),
			want: plan{Step: "none", Err: errUnreadable.Error(), Do: []string{"checkpoint", "report failure"},
				Memory: []string{"forget the download failure"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := decide(tc.o)
			diff(t, "plan", tc.want, planOf(d))
			if tc.message != "" {
				r := d.report
				if d.first != nil && d.step != stepReport {
					r = *d.first
				}
				if !strings.Contains(r.message, tc.message) {
					t.Errorf("condition message %q does not contain %q", r.message, tc.message)
				}
				if r.status != nil && r.status.Error != r.message {
					t.Errorf("status error %q is not the condition message %q", r.status.Error, r.message)
				}
			}
		})
	}
}

func TestTrialLeft(t *testing.T) {
	tests := map[string]struct {
		st   checkpoint.State
		now  time.Time
		want time.Duration
	}{
		"a trial that holds the node to a baseline is checked every trialCheckInterval": {
			st: inTrial("a", ""), now: t0.Add(time.Minute), want: trialCheckInterval,
		},
		"a trial without a baseline (adopted) syncs again when it ends": {
			st: checkpoint.State{Assigned: ref("a", "1"), AssignedAt: &started}, now: t0.Add(time.Minute), want: trial - time.Minute,
		},
		"the last check comes when the trial ends": {
			st: inTrial("a", ""), now: t0.Add(trial - time.Second), want: time.Second,
		},
		"a trial over is due for promotion": {
			st: inTrial("a", ""), now: t0.Add(trial), want: 0,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := max(trialLeft(tc.st, tc.now, trial), 0)
			diff(t, "left", tc.want, got)
		})
	}
}
