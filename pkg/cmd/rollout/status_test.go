package rollout

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/rollout/rollouttest"
)

// TestStatusExitCodes: rollout status ends the same way with and without
// -w for a rollout that has ended: 0 done, 2 halted, 1 aborted; without
// -w, a running or paused rollout is no error.
func TestStatusExitCodes(t *testing.T) {
	const halted = `rollout "r1" halted: node "n1" reported an error: failed to validate config, see Kubelet log for details: undo it with kubectl dkc rollout undo r1`
	tests := map[rollout.State]struct {
		code     int
		err      string
		watchErr error // -w only: Run's own error for this state
	}{
		rollout.Done:    {},
		rollout.Halted:  {code: 2, err: halted},
		rollout.Aborted: {code: 1, err: `rollout "r1": rollout aborted`},
		rollout.Running: {},
		rollout.Paused:  {},
	}
	for state, tc := range tests {
		for _, watch := range []bool{false, true} {
			if watch && !state.Terminal() {
				continue // -w follows it until it ends
			}
			t.Run(string(state)+map[bool]string{true: " -w"}[watch], func(t *testing.T) {
				r := rollout.New("kube-system", "r1", rollout.Spec{Config: cm("a"), Nodes: []string{"n1"}, MaxUnavailable: intstr.FromInt32(1)})
				r.Status.State = state
				r.Spec.Paused = state == rollout.Paused
				r.Spec.Aborted = state == rollout.Aborted
				if state == rollout.Halted {
					r.Status.Reason = `node "n1" reported an error: failed to validate config, see Kubelet log for details`
				}
				streams, _, out, _ := genericiooptions.NewTestIOStreams()
				o := &StatusOptions{Name: "r1", Namespace: "kube-system", Watch: watch, Client: fake.NewClientset(),
					Store: rollouttest.NewStore(t, "kube-system", r), IOStreams: streams}
				if watch {
					o.Timeout = 10 * time.Second // an end it did not see fails the test, not the run
				}
				err := o.Run(context.Background())
				if diff := cmp.Diff(tc.code, util.ExitCode(err)); diff != "" {
					t.Errorf("exit code (-want +got), error %v:\n%s", err, diff)
				}
				if diff := cmp.Diff(tc.err, errString(err)); diff != "" {
					t.Errorf("error (-want +got):\n%s", diff)
				}
				if state == rollout.Aborted && !errors.Is(err, rollout.ErrAborted) {
					t.Errorf("error %v does not match rollout.ErrAborted", err)
				}
				if out.Len() == 0 {
					t.Errorf("printed nothing")
				}
			})
		}
	}
}

// TestStatusJSONPath: rollout status -o jsonpath prints one field of the
// rollout, as its help shows for a script.
func TestStatusJSONPath(t *testing.T) {
	const reason = `node "n1" reported an error`
	r := rollout.New("kube-system", "r1", rollout.Spec{Config: cm("a"), Nodes: []string{"n1"}, MaxUnavailable: intstr.FromInt32(1)})
	r.Status.State, r.Status.Reason = rollout.Halted, reason
	streams, _, out, _ := genericiooptions.NewTestIOStreams()
	o := NewStatusOptions(streams)
	*o.PrintFlags.OutputFormat = "jsonpath={.status.reason}"
	p, err := util.Printer(o.PrintFlags)
	if err != nil {
		t.Fatalf("-o jsonpath: %v", err)
	}
	o.Name, o.Namespace, o.Printer, o.Client, o.Store = "r1", "kube-system", p, fake.NewClientset(), rollouttest.NewStore(t, "kube-system", r)
	if err := o.Run(context.Background()); util.ExitCode(err) != 2 {
		t.Errorf("exit code %d (%v), want 2 for a halted rollout", util.ExitCode(err), err)
	}
	if diff := cmp.Diff(reason, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}
