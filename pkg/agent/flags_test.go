package agent

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dkc/dkc/pkg/flagz"
	kfake "github.com/kubectl-dkc/dkc/pkg/kubelet/fake"
)

// flagsAnnotation is the node's flagz.Annotation, and whether it has one.
func (e *env) flagsAnnotation(t *testing.T) (string, bool) {
	t.Helper()
	v, ok := e.node(t).Annotations[flagz.Annotation]
	return v, ok
}

// flagPatches counts the patches of the node's status that set
// flagz.Annotation.
func (e *env) flagPatches() int {
	n := 0
	for _, a := range e.client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok && a.GetSubresource() == "status" &&
			strings.Contains(string(p.GetPatch()), flagz.Annotation) {
			n++
		}
	}
	return n
}

// TestFlagsOnTheNode: the agent records on its Node the config fields its
// kubelet's flags set, reads them again after each restart and each drift
// check interval, writes only a change, and records nothing of a kubelet
// that does not serve /flagz.
func TestFlagsOnTheNode(t *testing.T) {
	e := newEnv(t)
	e.prober.KubeletFlags = map[string]string{"max-pods": "42", "cgroup-driver": "cgroupfs", "node-ip": "10.0.0.1"}
	e.sync(t)
	want := `[{"field":"maxPods","flag":"max-pods","value":"42"}]`
	if v, ok := e.flagsAnnotation(t); !ok || v != want {
		t.Fatalf("after the first sync: %s = %q (set %v), want %q", flagz.Annotation, v, ok, want)
	}
	if got, ok := flagz.OnNode(e.node(t)); !ok || len(got) != 1 || got[0].Field != "maxPods" {
		t.Errorf("flagz.OnNode = %v, %v", got, ok)
	}

	// Unchanged flags write nothing; changed ones wait for the interval.
	e.sync(t)
	e.prober.KubeletFlags = map[string]string{"max-pods": "110"}
	e.sync(t)
	if n := e.flagPatches(); n != 1 {
		t.Errorf("%d patches of the annotation, want 1", n)
	}
	e.clk.Step(DefaultDriftCheckInterval)
	e.sync(t)
	if v, _ := e.flagsAnnotation(t); v != "[]" {
		t.Errorf("a drift check interval later: %q, want []", v)
	}

	// A restart of the agent's own: read at once.
	e.prober.KubeletFlags = map[string]string{"fail-swap-on": "false"}
	e.configMap(t, "a", cfgA, nil)
	e.assign(t, "a")
	e.sync(t)
	if len(e.restart.CallsSnapshot()) == 0 {
		t.Fatal("the assignment made no restart")
	}
	if v, _ := e.flagsAnnotation(t); v != `[{"field":"failSwapOn","flag":"fail-swap-on","value":"false"}]` {
		t.Errorf("after the agent's restart: %q, want failSwapOn", v)
	}

	// A kubelet without /flagz: nothing is known, nothing is recorded.
	e.prober.KubeletFlags = nil
	e.clk.Step(DefaultDriftCheckInterval)
	e.sync(t)
	if v, ok := e.flagsAnnotation(t); ok {
		t.Errorf("a kubelet without /flagz: %s = %q, want none", flagz.Annotation, v)
	}
}

// TestFlagsReadFailureKeepsTheRecord: a kubelet that does not answer leaves
// the record as it was, and the next sync reads again; the sync is not
// hastened for it, as the kubelet would fail the read again at once.
func TestFlagsReadFailureKeepsTheRecord(t *testing.T) {
	e := newEnv(t)
	e.prober.KubeletFlags = map[string]string{"max-pods": "42"}
	e.sync(t)
	failing := &failingFlags{FakeProber: e.prober}
	e.a.Prober = failing
	e.clk.Step(DefaultDriftCheckInterval)
	if requeue := e.sync(t); requeue > 0 && requeue <= flagsRetry {
		t.Errorf("a sync whose read of the flags failed asks to sync again in %s: the read would fail again", requeue)
	}
	if v, _ := e.flagsAnnotation(t); v != `[{"field":"maxPods","flag":"max-pods","value":"42"}]` {
		t.Errorf("after a failed read: %q, want the record kept", v)
	}
	e.a.Prober = e.prober
	e.prober.KubeletFlags = map[string]string{}
	e.sync(t) // no interval: the failed read left it due
	if v, _ := e.flagsAnnotation(t); v != "[]" {
		t.Errorf("the sync after a failed read: %q, want []", v)
	}
	if failing.calls == 0 {
		t.Error("the failing prober was never asked")
	}
}

// TestFlagsWriteFailureRetriesSoon: a write of the record that the
// apiserver refuses asks for a sync within flagsRetry, which writes it.
func TestFlagsWriteFailureRetriesSoon(t *testing.T) {
	e := newEnv(t)
	e.a.DriftCheckInterval = -1 // no drift check: only the retry comes back
	e.prober.KubeletFlags = map[string]string{"max-pods": "42"}
	refuse := true
	e.client.PrependReactor("patch", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
		p := action.(k8stesting.PatchAction)
		if refuse && strings.Contains(string(p.GetPatch()), flagz.Annotation) {
			return true, nil, apierrors.NewTooManyRequests("the apiserver is busy", 1)
		}
		return false, nil, nil
	})
	if requeue := e.sync(t); requeue <= 0 || requeue > flagsRetry {
		t.Errorf("a sync whose write of the record failed asks to sync again in %s, want at most %s", requeue, flagsRetry)
	}
	if v, ok := e.flagsAnnotation(t); ok {
		t.Fatalf("a refused write recorded %q", v)
	}
	refuse = false
	e.sync(t)
	if v, _ := e.flagsAnnotation(t); v != `[{"field":"maxPods","flag":"max-pods","value":"42"}]` {
		t.Errorf("the sync after a refused write: %q, want maxPods recorded", v)
	}
}

// failingFlags is a kubelet whose /flagz does not answer.
type failingFlags struct {
	*kfake.FakeProber
	calls int
}

func (f *failingFlags) Flags(context.Context, []byte) (map[string]string, error) {
	f.calls++
	return nil, errors.New("dial tcp 127.0.0.1:10250: connect: connection refused")
}
