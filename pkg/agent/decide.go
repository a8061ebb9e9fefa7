package agent

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kubectl-dkc/dkc/pkg/apis/dkc/v1alpha1"
	"github.com/kubectl-dkc/dkc/pkg/checkpoint"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// step is what a sync does to the node, as decide chose it.
type step int

const (
	// stepNone touches nothing and reports nothing: the ConfigMap's
	// informer has not listed yet, or the sync fails with the decision's
	// err.
	stepNone step = iota
	// stepReport touches nothing but the report: the decision's report,
	// then its err.
	stepReport
	// stepReset puts the kubelet back on its local config (reset); the
	// decision's report is what it reports once it has.
	stepReset
	// stepApply checks the assignment and, if it passes, commits it and
	// puts it on the kubelet through the restart and the health gate
	// (apply).
	stepApply
	// stepRestore puts the last-known-good config back after the assigned
	// one failed (restoreLastKnownGood): a rollback's retry.
	stepRestore
	// stepSettle keeps the assigned config, which the kubelet runs: it
	// verifies it or checks its trial as the decision says, promotes it
	// when its trial is over, and reports it (settle).
	stepSettle
)

var stepNames = map[step]string{
	stepNone: "none", stepReport: "report", stepReset: "reset", stepApply: "apply", stepRestore: "restore", stepSettle: "settle",
}

func (s step) String() string { return stepNames[s] }

// decision is what a sync does about what it observed: a step, what to
// report, and how the agent's memory changes.
type decision struct {
	step step
	// report is stepReport's report, or stepReset's once the local config
	// is back.
	report report
	// first, when set, is reported before what the step reports, in the
	// same patch: its Events and history entries come first (a drift seen,
	// then reasserted; a warning about the ConfigMap). When the step
	// reports nothing, first is the report.
	first *report
	// err is the sync's error after stepNone or stepReport.
	err error
	// checkpoint saves the assignment's checkpoint again before the step:
	// the recorded assignment's bytes, which passed their checks when it
	// was applied, lost with a store the agent did not write completely.
	checkpoint bool
	// verify makes stepSettle gate the config in trial on the kubelet's
	// health (the agent started during its trial, perhaps killed between a
	// restart and its gate); trialCheck, in a sync that does not verify,
	// holds the node to the baseline taken before the restart.
	verify, trialCheck bool
	// reportFailure reports a failure of the step that reports nothing
	// itself with what the kubelet's config holds then: the status must
	// not keep claiming what a failed step meant to do.
	reportFailure bool
	// logs are the decision's lines in the agent's log.
	logs []logLine
	memo memo
}

// logLine is a line of the agent's log: a message and its key-value pairs.
type logLine struct {
	msg string
	kv  []any
}

// memo is how a sync changes the agent's memory of earlier syncs, and
// what it counts.
type memo struct {
	// forgetAssignment forgets the refusal, the pending verification and
	// the download failure: the assignment is gone.
	forgetAssignment bool
	// forgetDownload forgets the download failure: the ConfigMap is found.
	forgetDownload bool
	// forgetDrift forgets the drift reported: the file holds a config the
	// agent wrote.
	forgetDrift bool
	// refuse remembers a refusal, so that the config is not checked (and
	// reported with an Event) again until the ConfigMap or the pin
	// changes.
	refuse *refusal
	// downloadFailed, drifted and warned (the ConfigMap version warned
	// about in first) are remembered once the report is published, so that
	// the same failure, drift or warning is reported with an Event once.
	downloadFailed, drifted, warned string
	// count is the result of Metrics.Applies to count ("" none); drift
	// counts a drift.
	count string
	drift bool
}

// decide is what a sync does about o. It is a pure function of o: what the
// agent does for each state of the record, the assignment, the ConfigMap,
// the kubelet's config and its memory is this function's table
// (decide_test.go).
func decide(o *observed) decision {
	st := o.st
	switch {
	case o.assignErr != nil:
		msg := v1alpha1.SyncErrorPrefix + o.assignErr.Error()
		if !errors.Is(o.assignErr, source.ErrAllNilSubfields) {
			msg = v1alpha1.SyncErrorPrefix + v1alpha1.InternalError + ": " + o.assignErr.Error()
		}
		return decision{step: stepReport, report: failedReport(o, st.Assigned, &configError{reason: ReasonFailed, msg: msg})}
	case o.assigned == nil:
		return decideReset(o)
	}
	var lerr *listError
	switch {
	case errors.Is(o.cmErr, errNotSynced):
		// The informer's first list or list error queues the node.
		return decision{}
	case errors.As(o.cmErr, &lerr):
		return downloadFailure(o, downloadError(lerr.detail()))
	case apierrors.IsNotFound(o.cmErr):
		return downloadFailure(o, missingError(o.cmName))
	case o.cmErr != nil:
		return decision{err: fmt.Errorf("get configmap %s: %w", o.cmName, o.cmErr)}
	}
	want := o.as.src
	var d decision
	switch {
	case o.pinErr != nil:
		msg := v1alpha1.SyncErrorPrefix + v1alpha1.InternalError + ": " + o.pinErr.Error()
		d = decision{step: stepReport, report: failedReport(o, want, &configError{reason: ReasonFailed, msg: msg})}
	case o.refused != nil:
		// Refused before, and neither the ConfigMap nor the pin changed.
		d = decision{step: stepReport, report: failedReport(o, want, o.refused)}
	case o.payloadErr != nil:
		d = decideRefusal(o, o.payloadErr)
	default:
		if source.Equal(st.Assigned, want) {
			d = decideSettle(o)
		} else {
			d = decision{step: stepApply, reportFailure: true}
		}
		if warning, version := ignoredAnnotation(o.as.cm, o.warnedAnnotation); version != "" {
			d.logs = append([]logLine{{"Warning: " + warning.message, []any{"configMap", o.cmName}}}, d.logs...)
			d.memo.warned = version
			w := report{keepStatus: true, events: []event{warning}}
			if d.first != nil {
				w = d.first.after(w)
			}
			d.first = &w
		}
	}
	d.memo.forgetDownload = true
	return d
}

// decideReset is the decision without an assignment: put the local config
// back unless the kubelet runs it, and report it. Bytes that no one
// assigned, on a node that never had an assignment, are the operator's,
// unless --on-drift=reassert.
func decideReset(o *observed) decision {
	d := decision{memo: memo{forgetAssignment: true}}
	if o.file.err != nil {
		d.err = o.file.err
		return d
	}
	st := o.st
	changed := st != (checkpoint.State{}) || o.file.source != nil
	if o.file.drift && o.onDrift != DriftReassert && st.Assigned == nil && st.LastKnownGood == nil {
		changed = false
	}
	d.step = stepReport
	if changed {
		d.step = stepReset
	}
	const message = "assignment removed; kubelet runs its local config"
	switch {
	case changed || o.hasCondition:
		d.report = report{reason: ReasonReset, message: message}
		if changed {
			d.report.events = []event{{reason: ReasonReset}}
			d.report.history = []source.HistoryEntry{{Result: source.ResultReset, Message: message}}
		}
	default:
		// The agent's first report on a node that never had an
		// assignment: it shows that an agent looks after the node.
		d.report = report{reason: ReasonLocal, message: "no config assigned; kubelet runs its local config"}
	}
	return d
}

// downloadFailure is the decision when the assigned ConfigMap cannot be
// downloaded: report it, with the kubelet and the store untouched. A new
// error is counted and recorded as an Event; the same error again (the
// informer retries with backoff and queues the node on each failure) only
// keeps the status. The informer's first successful list queues the node
// again, so a later RBAC grant or the ConfigMap's creation converges
// without a restart.
func downloadFailure(o *observed, cerr *configError) decision {
	d := decision{step: stepReport, report: failedReport(o, o.st.Assigned, cerr)}
	d.memo.downloadFailed = cerr.msg
	if cerr.msg != o.downloadFailed {
		d.logs = append(d.logs, logLine{"Cannot download the assigned config; the kubelet is untouched", []any{"err", cerr.msg}})
		d.memo.count = ResultFailed
		d.report.events = []event{{reason: ReasonFailed}}
	}
	return d
}

// decideRefusal is the decision for an assignment that failed its checks, or
// whose bytes are not the ones its assigner pinned: report it and remember
// it, so that it is not checked (and reported with an Event) again until
// the ConfigMap or the pin changes. A failure that is not the config's
// fault is reported and retried.
func decideRefusal(o *observed, cerr *configError) decision {
	want := o.as.src
	d := decision{step: stepReport, report: failedReport(o, want, cerr)}
	if cerr.reason != ReasonRefused && cerr.reason != ReasonPinMismatch {
		d.memo.count = ResultFailed
		d.err = cerr
		return d
	}
	d.logs = append(d.logs, logLine{"Refused config; the kubelet is untouched", []any{"reason", cerr.reason, "err", cerr.msg}})
	d.memo.count = ResultRefused
	d.memo.refuse = &refusal{src: want, pin: o.as.pin.DeepCopy(), err: cerr}
	d.report.events = []event{{reason: cerr.reason}}
	d.report.history = []source.HistoryEntry{{Source: want, Result: source.ResultRefused, Message: cerr.msg}}
	return d
}

// decideSettle is the decision for an assignment that is already recorded.
// The kubelet's config file wins over the record: a config the agent wrote
// that is not the target is repaired through the restart and the health
// gate; bytes the agent never wrote are drift, reported once per content
// and, with --on-drift=reassert, replaced by the target the same way; a
// config that failed stays rolled back; a config in trial is verified once
// after the agent started, and held to its baseline by every other sync
// until its trial ends.
func decideSettle(o *observed) decision {
	st := o.st
	d := decision{checkpoint: true, reportFailure: true}
	toTarget := stepApply
	if st.Failed() {
		toTarget = stepRestore
	}
	switch f := o.file; {
	case f.err != nil:
		d.err = f.err
	case f.drift:
		// Drift is reported in the status (no config named active, the
		// error says why), the condition, an Event and a history entry,
		// once per distinct content.
		msg := driftMessage(st, o.onDrift)
		r := report{carrier: o.carrier, status: observedStatus(st, st.Assigned, f, msg, o.onDrift), reason: ReasonDrift, message: msg}
		if o.drifted != o.fileHash {
			d.logs = append(d.logs, logLine{"The kubelet's config drifted from what the agent wrote", []any{"effectiveSHA256", o.fileHash, "onDrift", o.onDrift}})
			d.memo.drift = true
			r.events = []event{{reason: ReasonDrift}}
			r.history = []source.HistoryEntry{{Source: st.Target(), Result: source.ResultDrift, Message: msg}}
		}
		d.memo.drifted = o.fileHash
		if o.onDrift != DriftReassert {
			d.step, d.report = stepReport, r
			return d
		}
		d.logs = append(d.logs, logLine{"Reasserting the recorded config", []any{"config", describe(st.Target())}})
		d.first = &r
		d.step = toTarget
	case !source.Equal(f.source, st.Target()):
		d.logs = append(d.logs, logLine{"The kubelet's config is not the one the agent recorded; repairing", []any{"file", describe(f.source), "want", describe(st.Target())}})
		d.memo.forgetDrift = true
		d.step = toTarget
	case st.Failed():
		d.memo.forgetDrift = true
		d.step, d.report = stepReport, rolledBackReport(o.carrier, st, f, o.onDrift)
	default:
		d.memo.forgetDrift = true
		inTrial := !source.Equal(st.LastKnownGood, st.Assigned)
		d.step, d.verify = stepSettle, o.verifyPending && inTrial
		// A sync that verifies the kubelet's health checks more than the
		// trial does, and its node predates that check (the NotReady of
		// the restart it waits out): the next sync checks the trial.
		d.trialCheck = inTrial && !d.verify
	}
	return d
}

// failedReport reports cerr for the assignment assigned, with the kubelet
// on what its config file holds.
func failedReport(o *observed, assigned *corev1.NodeConfigSource, cerr *configError) report {
	return report{
		carrier: o.carrier,
		status:  observedStatus(o.st, assigned, o.file, cerr.msg, o.onDrift),
		reason:  cerr.reason,
		message: cerr.msg,
	}
}

// rolledBackReport is the report of a kubelet back on the last-known-good
// config after the assigned one failed.
func rolledBackReport(c source.Carrier, st checkpoint.State, obs observation, onDrift string) report {
	return report{
		carrier: c,
		status:  observedStatus(st, st.Assigned, obs, st.Error, onDrift),
		reason:  ReasonRolledBack,
		message: st.Error,
	}
}
