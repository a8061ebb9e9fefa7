package agent

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dkc/dkc/pkg/kubelet"
)

// seen is what the Node showed while the health gate still ran.
type seen struct {
	Status    *corev1.NodeConfigStatus
	Condition string
}

// runningThen makes the fake prober call Expectation.Running, as the real
// one does once the kubelet's configz shows the config, record what the Node
// shows at that moment and after, then return result.
func (e *env) runningThen(t *testing.T, result error) *[]seen {
	var got []seen
	e.prober.OnProbe = func(want kubelet.Expectation) {
		if want.Running == nil {
			return
		}
		want.Running()
		got = append(got, seen{e.status(t), e.condition(t)})
		if result != nil {
			e.prober.Default = result
		}
	}
	return &got
}

// TestVerifyingBeforeReady: once the restarted kubelet's configz shows the
// assigned config, the status names it as active while the gate waits for
// Ready, with the condition Verifying (Unknown) so that waiters know the gate
// has not passed; the gate's end turns it into Trial.
func TestVerifyingBeforeReady(t *testing.T) {
	e := newEnv(t)
	during := e.runningThen(t, nil)
	e.configMap(t, "a", cfgA, nil)
	e.assign(t, "a")
	e.sync(t)

	diff(t, "while the gate waits for Ready", []seen{{
		Status:    &corev1.NodeConfigStatus{Assigned: ref("a", "1"), Active: ref("a", "1")},
		Condition: "Unknown Verifying",
	}}, *during)
	diff(t, "status after the gate", &corev1.NodeConfigStatus{Assigned: ref("a", "1"), Active: ref("a", "1")}, e.status(t))
	diff(t, "condition after the gate", "True Trial", e.condition(t))
	diff(t, "events", []string{"Normal Applied"}, e.events())
}

// TestVerifyingThenRolledBack: a kubelet that runs the new config but never
// becomes Ready is rolled back; the status that named the config as active
// during the gate names the last-known-good one again, with the error.
func TestVerifyingThenRolledBack(t *testing.T) {
	e := newEnv(t)
	e.onLastKnownGood(t, "a", cfgA)
	gateErr := fmt.Errorf("%w: node: Ready is False: KubeletNotReady: PLEG is not healthy", kubelet.ErrHealthGate)
	during := e.runningThen(t, nil)
	e.prober.Results = []error{gateErr}
	e.configMap(t, "b", cfgB, nil)
	e.assign(t, "b")
	if _, err := e.a.sync(t.Context(), e.node(t), e.getter); err != nil {
		var cerr *configError
		if !errors.As(err, &cerr) {
			t.Fatalf("sync: %v", err)
		}
	}

	diff(t, "while the gate waits for Ready", []seen{{
		Status:    &corev1.NodeConfigStatus{Assigned: ref("b", "1"), Active: ref("b", "1"), LastKnownGood: ref("a", "1")},
		Condition: "Unknown Verifying",
	}}, *during)
	st := e.status(t)
	diff(t, "active after the rollback", ref("a", "1"), st.Active)
	if st.Error == "" {
		t.Errorf("status after the rollback has no error: %+v", st)
	}
	diff(t, "condition after the rollback", "False RolledBack", e.condition(t))
	diff(t, "kubelet config", cfgA, string(e.writer.Current))
}

// TestFirstReportWithoutAssignment: an agent's first sync on a node that was
// never assigned anything reports its condition, so that the node shows an
// agent (status AGENT ready) before its first assignment, and touches
// nothing.
func TestFirstReportWithoutAssignment(t *testing.T) {
	e := newEnv(t)
	e.sync(t)

	diff(t, "condition", "True Local", e.condition(t))
	diff(t, "status", (*corev1.NodeConfigStatus)(nil), e.status(t))
	diff(t, "restarter calls", []string(nil), e.restart.CallsSnapshot())
	diff(t, "events", []string(nil), e.events())
}

// TestOnePatchPerReport: an apply's report, its status, history and
// condition, is one patch of nodes/status, so no reader sees the new status
// without its condition.
func TestOnePatchPerReport(t *testing.T) {
	e := newEnv(t)
	e.configMap(t, "a", cfgA, nil)
	e.assign(t, "a")
	e.client.ClearActions()
	e.sync(t)

	var patches []string
	for _, act := range e.client.Actions() {
		if p, ok := act.(k8stesting.PatchAction); ok && act.GetResource().Resource == "nodes" {
			patches = append(patches, fmt.Sprintf("%s %s", act.GetSubresource(), p.GetPatchType()))
		}
	}
	diff(t, "patches of the node", []string{"status application/strategic-merge-patch+json"}, patches)
	diff(t, "status", &corev1.NodeConfigStatus{Assigned: ref("a", "1"), Active: ref("a", "1")}, e.status(t))
	diff(t, "condition", "True Trial", e.condition(t))
}
