package rollout

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-dkc/dkc/pkg/pool"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/rollout/rollouttest"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/pkg/table"
)

// listed returns a rollout of config over nodes, created age ago, with
// labels; the first node is Succeeded.
func listed(name, config string, age time.Duration, labels map[string]string, nodes ...string) *rollout.Rollout {
	r := rollout.New("kube-system", name, rollout.Spec{Config: cm(config), Nodes: nodes, MaxUnavailable: intstr.FromInt32(1)})
	r.Labels = labels
	r.CreationTimestamp = metav1.NewTime(time.Now().Add(-age))
	r.Status.State = rollout.Running
	r.Status.Nodes = map[string]rollout.NodeStatus{nodes[0]: {Phase: rollout.Succeeded}}
	return r
}

// TestListOutput: the table by default, newest first, with <none> for the pool
// and revision of a rollout that is no pool's; -o as PrintFlags has it.
func TestListOutput(t *testing.T) {
	rollouts := []*rollout.Rollout{
		listed("r1", "a", 72*time.Hour+time.Minute, nil, "n1", "n2"),
		listed("workers-2", "b", 90*time.Minute, map[string]string{pool.Label: "workers", pool.RevisionLabel: "2"}, "n3"),
	}
	tests := map[string]struct {
		rollouts            []*rollout.Rollout
		output              string
		wantOut, wantErrOut string
	}{
		"table": {rollouts: rollouts, wantOut: "" +
			"NAME        STATE     POOL      REVISION   CONFIG          NODES   DONE   AGE\n" +
			"workers-2   Running   workers   2          kube-system/b   1       1      90m\n" +
			"r1          Running   <none>    <none>     kube-system/a   2       1      3d\n"},
		"table, no rollouts":    {wantErrOut: "No rollouts found in kube-system namespace.\n"},
		"jsonpath":              {rollouts: rollouts, output: "jsonpath={.items[*].metadata.name}", wantOut: "workers-2 r1"},
		"jsonpath, no rollouts": {output: "jsonpath={.items[*].metadata.name}"},
		// What kubectl get -o name prints, so that names chain into other
		// commands.
		"name": {rollouts: rollouts, output: "name", wantOut: "nodeconfigrollout.kubectl-dkc.io/workers-2\nnodeconfigrollout.kubectl-dkc.io/r1\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			streams, _, out, errOut := genericiooptions.NewTestIOStreams()
			o := &ListOptions{Namespace: source.DefaultNamespace, PrintFlags: genericclioptions.NewPrintFlags(""), IOStreams: streams}
			*o.PrintFlags.OutputFormat = tc.output
			o.Printer = table.Printer(rolloutTable)
			if tc.output != "" {
				p, err := o.PrintFlags.ToPrinter()
				if err != nil {
					t.Fatal(err)
				}
				o.Printer = p
			}
			o.Store = rollouttest.NewStore(t, source.DefaultNamespace, tc.rollouts...)
			if err := o.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			checkStreams(t, tc.wantOut, tc.wantErrOut, out, errOut)
		})
	}
}

// TestPoolHistory: a pool's revisions, oldest first, the current one
// marked, with <none> for what a revision did not pin or allow.
func TestPoolHistory(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 11, 26, 3, 30, 1, 0, time.UTC))
	rev := func(name, config string, pin *source.Pin, state rollout.State) *rollout.Rollout {
		r := rollout.New("kube-system", name, rollout.Spec{Config: cm(config), Pin: pin})
		r.CreationTimestamp = created
		r.Status.State = state
		return r
	}
	p := &pool.Pool{ObjectMeta: metav1.ObjectMeta{Name: "workers"}, Status: pool.Status{Revision: 2}}
	revs := []pool.Revision{
		{Number: 1, Rollouts: []*rollout.Rollout{rev("workers-1", "pool-a", nil, rollout.Done)}},
		{Number: 2, Rollouts: []*rollout.Rollout{
			rev("workers-2", "pool-b", &source.Pin{Digest: "sha256:0c9e51a7b4f2aaaaaaaa", AllowUnsafe: []string{"restart", "eviction"}}, rollout.Done),
			rev("workers-2-2", "pool-b", nil, rollout.Halted),
		}},
	}
	tests := map[string]struct {
		revs                []pool.Revision
		wantOut, wantErrOut string
	}{
		"revisions": {revs: revs, wantOut: "nodeconfigpool/workers\n" +
			"REVISION      CONFIG               DIGEST                ALLOW-UNSAFE       ROLLOUTS                STATE    CREATED\n" +
			"1             kube-system/pool-a   <none>                <none>             workers-1               Done     2026-11-26T03:30:01Z\n" +
			"2 (current)   kube-system/pool-b   sha256:0c9e51a7b4f2   restart,eviction   workers-2,workers-2-2   Halted   2026-11-26T03:30:01Z\n"},
		"no revisions": {wantOut: "nodeconfigpool/workers\n", wantErrOut: "No revisions found.\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			streams, _, out, errOut := genericiooptions.NewTestIOStreams()
			if err := printPoolHistory(streams, p, tc.revs); err != nil {
				t.Fatal(err)
			}
			checkStreams(t, tc.wantOut, tc.wantErrOut, out, errOut)
		})
	}
}

// checkStreams reports where out and errOut differ from what a command
// should have printed to them.
func checkStreams(t *testing.T, wantOut, wantErrOut string, out, errOut *bytes.Buffer) {
	t.Helper()
	if diff := cmp.Diff(wantOut, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantErrOut, errOut.String()); diff != "" {
		t.Errorf("error output (-want +got):\n%s", diff)
	}
}
