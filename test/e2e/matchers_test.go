package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-dkc/dkc/pkg/controller"
	"github.com/kubectl-dkc/dkc/pkg/status"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// statusMatcher is one condition on a node's dkc status, as
// `kubectl dkc status NODE -o json` reports it, with the words that
// name it in a failure.
type statusMatcher struct {
	desc  string
	match func(*corev1.NodeConfigStatus) bool
}

// Active matches a status whose active config is the ConfigMap cm.
func Active(cm string) statusMatcher {
	return statusMatcher{"active " + cm, func(st *corev1.NodeConfigStatus) bool {
		return st != nil && framework.IsConfigMap(st.Active, cm)
	}}
}

// LKG matches a status whose last-known-good config is the ConfigMap cm.
func LKG(cm string) statusMatcher {
	return statusMatcher{"last-known-good " + cm, func(st *corev1.NodeConfigStatus) bool {
		return st != nil && framework.IsConfigMap(st.LastKnownGood, cm)
	}}
}

// Assigned matches a status whose assigned config is the ConfigMap cm.
func Assigned(cm string) statusMatcher {
	return statusMatcher{"assigned " + cm, func(st *corev1.NodeConfigStatus) bool {
		return st != nil && framework.IsConfigMap(st.Assigned, cm)
	}}
}

// NoError matches a status without an error.
func NoError() statusMatcher {
	return statusMatcher{"no error", func(st *corev1.NodeConfigStatus) bool {
		return st != nil && st.Error == ""
	}}
}

// AnyError matches a status with an error.
func AnyError() statusMatcher {
	return statusMatcher{"an error", func(st *corev1.NodeConfigStatus) bool {
		return st != nil && st.Error != ""
	}}
}

// ErrorContains matches a status whose error contains s.
func ErrorContains(s string) statusMatcher {
	return statusMatcher{fmt.Sprintf("an error containing %q", s), func(st *corev1.NodeConfigStatus) bool {
		return st != nil && strings.Contains(st.Error, s)
	}}
}

// ErrorPrefix matches a status whose error begins with s.
func ErrorPrefix(s string) statusMatcher {
	return statusMatcher{fmt.Sprintf("an error beginning with %q", s), func(st *corev1.NodeConfigStatus) bool {
		return st != nil && strings.HasPrefix(st.Error, s)
	}}
}

// NoStatus matches a node without a status: nothing assigned, or the
// agent's status cleared.
func NoStatus() statusMatcher {
	return statusMatcher{"no status", func(st *corev1.NodeConfigStatus) bool {
		return st == nil
	}}
}

// NoActive matches a status that names no active config.
func NoActive() statusMatcher {
	return statusMatcher{"no active config", func(st *corev1.NodeConfigStatus) bool {
		return st != nil && st.Active == nil
	}}
}

// AnyStatus matches any status.
func AnyStatus() statusMatcher {
	return statusMatcher{"a status", func(st *corev1.NodeConfigStatus) bool {
		return st != nil
	}}
}

// eventuallyStatus polls the status of node, as the built
// `kubectl dkc status NODE -o json` reports it, until every matcher
// matches, and returns it. An apply ends with the health gate: a status
// that matches while the gate still waits for Ready (AGENT verifying)
// does not count yet. It fails the test after timeout, naming the
// matchers and the last status.
func eventuallyStatus(t *testing.T, c *framework.Cluster, node string, timeout time.Duration, ms ...statusMatcher) *corev1.NodeConfigStatus {
	t.Helper()
	var last *corev1.NodeConfigStatus
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		cmd := exec.Command(framework.DKCBinary(), "--kubeconfig", c.Kubeconfig, "status", node, "-o", "json")
		out, err := cmd.Output()
		// A node's error for its assignment exits 2 after the list.
		if err != nil && cmd.ProcessState.ExitCode() != status.ExitConfigError {
			return false, nil
		}
		var list status.NodeConfigList
		if err := json.Unmarshal(out, &list); err != nil {
			return false, fmt.Errorf("kubectl dkc status -o json: %v\n%s", err, out)
		}
		if len(list.Items) != 1 {
			return false, nil
		}
		last = list.Items[0].Status
		if list.Items[0].Agent == status.AgentVerifying {
			return false, nil
		}
		for _, m := range ms {
			if !m.match(last) {
				return false, nil
			}
		}
		return true, nil
	})
	b, _ := json.Marshal(last)
	if err != nil {
		if !wait.Interrupted(err) {
			t.Fatal(err)
		}
		descs := make([]string, len(ms))
		for i, m := range ms {
			descs[i] = m.desc
		}
		t.Fatalf("timed out after %s waiting for %s in the status of %s; last: %s", timeout, strings.Join(descs, ", "), node, b)
	}
	t.Logf("status of %s: %s", node, b)
	return last
}

// startFrom brings node to the starting state of a subtest: cm active and
// last-known-good, with no error. It assigns cm, which changes nothing
// when the node already runs it (no restart), and waits out the trial.
func startFrom(t *testing.T, c *framework.Cluster, node, cm string, timeout time.Duration) *corev1.NodeConfigStatus {
	t.Helper()
	mustDKC(t, c, "", "assign", node, "--config", cm)
	return eventuallyStatus(t, c, node, timeout, Active(cm), LKG(cm), NoError())
}

// startAssigned brings node to the starting state of a subtest that needs
// it to run some assignment: cm, unless it already runs one.
func startAssigned(t *testing.T, c *framework.Cluster, node, cm string, timeout time.Duration) {
	t.Helper()
	if st := statusNow(t, c, node); st == nil || st.Active == nil {
		startFrom(t, c, node, cm, timeout)
	}
}

// startUnassigned brings node to the starting state of a subtest that
// needs no assignment: it resets the node when it has a config status.
func startUnassigned(t *testing.T, c *framework.Cluster, node string, timeout time.Duration) {
	t.Helper()
	if statusNow(t, c, node) == nil {
		return
	}
	mustDKC(t, c, "", "reset", node)
	eventuallyStatus(t, c, node, timeout, NoStatus())
}

// statusNow is the status of node as `kubectl dkc status NODE -o json`
// reports it now; nil when it has none.
func statusNow(t *testing.T, c *framework.Cluster, node string) *corev1.NodeConfigStatus {
	t.Helper()
	var list status.NodeConfigList
	r := readDKC(t, c, "status", node, "-o", "json")
	if err := json.Unmarshal([]byte(r.Stdout), &list); err != nil || len(list.Items) != 1 {
		t.Fatalf("kubectl dkc status %s -o json: %v\n%s", node, err, r.Stdout)
	}
	return list.Items[0].Status
}

// waitFor polls cond every 100ms until it holds, and fails the test
// after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// consistently checks cond every 100ms for d, and fails the test at the
// first time it does not hold, naming what: the room a test leaves for
// something that must not happen, watched while it lasts.
func consistently(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, d, true, func(context.Context) (bool, error) {
		return !cond(), nil
	})
	if err == nil {
		t.Errorf("not consistently %s for %s", what, d)
	}
}

// consistentlyNoRestart watches the kubelet for d, every 100ms, and fails
// the test as soon as its PID or its start count differs from the one at
// the call: it leaves room for a wrong restart and reports it as it
// happens. Callers keep their own check against the values from before
// the change that should not restart the kubelet.
func consistentlyNoRestart(t *testing.T, what string, d time.Duration, pid func() int, starts func() int) {
	t.Helper()
	pid0, starts0 := pid(), starts()
	var pid1, starts1 int
	consistently(t, d, "no kubelet restart after "+what, func() bool {
		pid1, starts1 = pid(), starts()
		return pid1 == pid0 && starts1 == starts0
	})
	if pid1 != pid0 || starts1 != starts0 {
		t.Logf("kubelet PID %d -> %d, starts %d -> %d", pid0, pid1, starts0, starts1)
	}
}

// waitLeader waits up to timeout for a dkc controller to hold the Lease in
// kube-system and returns the holder's identity. With want set, it waits
// for that identity to hold it.
func waitLeader(t *testing.T, c *framework.Cluster, timeout time.Duration, want string) string {
	t.Helper()
	var lead string
	what := "a controller to lead"
	if want != "" {
		what = "controller " + want + " to lead"
	}
	waitFor(t, timeout, what, func() bool {
		l, err := controller.Leader(context.Background(), c.Client, "kube-system", time.Now())
		if err != nil || l == "" || (want != "" && l != want) {
			return false
		}
		lead = l
		return true
	})
	return lead
}
