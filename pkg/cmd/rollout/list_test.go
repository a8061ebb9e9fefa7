package rollout

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
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
	r.Status.Counts = rollout.Counts{Updated: 1, Waiting: len(nodes) - 1}
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
		output, selector    string
		wantOut, wantErrOut string
	}{
		"table": {rollouts: rollouts, wantOut: "" +
			"NAME        STATE     POOL      REVISION   CONFIG          NODES   DONE   AGE\n" +
			"workers-2   Running   workers   2          kube-system/b   1       1      90m\n" +
			"r1          Running   <none>    <none>     kube-system/a   2       1      3d\n"},
		"table, no rollouts":    {wantErrOut: "No rollouts found in kube-system namespace.\n"},
		"jsonpath":              {rollouts: rollouts, output: "jsonpath={.items[*].metadata.name}", wantOut: "workers-2 r1"},
		"jsonpath, no rollouts": {output: "jsonpath={.items[*].metadata.name}"},
		"wide": {rollouts: rollouts, output: "wide", wantOut: "" +
			"NAME        STATE     POOL      REVISION   CONFIG          NODES   DONE   AGE   MAX-UNAVAILABLE   CANARY   REASON\n" +
			"workers-2   Running   workers   2          kube-system/b   1       1      90m   1                 0        <none>\n" +
			"r1          Running   <none>    <none>     kube-system/a   2       1      3d    1                 0        <none>\n"},
		"-l": {rollouts: rollouts, selector: pool.Label + "=workers", wantOut: "" +
			"NAME        STATE     POOL      REVISION   CONFIG          NODES   DONE   AGE\n" +
			"workers-2   Running   workers   2          kube-system/b   1       1      90m\n"},
		"-l, no match": {rollouts: rollouts, selector: pool.Label + "=gpu", wantErrOut: "No rollouts found in kube-system namespace.\n"},
		// What kubectl get -o name prints, so that names chain into other
		// commands.
		"name": {rollouts: rollouts, output: "name", wantOut: "nodeconfigrollout.kubectl-dkc.io/workers-2\nnodeconfigrollout.kubectl-dkc.io/r1\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			streams, _, out, errOut := genericiooptions.NewTestIOStreams()
			o := &ListOptions{Namespace: source.DefaultNamespace, Selector: tc.selector, PrintFlags: genericclioptions.NewPrintFlags(""), IOStreams: streams}
			*o.PrintFlags.OutputFormat = tc.output
			o.Wide = tc.output == "wide"
			o.Printer = table.Printer(rolloutTable(o.Wide))
			if tc.output != "" && !o.Wide {
				p, err := o.PrintFlags.ToPrinter()
				if err != nil {
					t.Fatal(err)
				}
				o.Printer = p
			}
			if err := o.Validate(); err != nil {
				t.Fatal(err)
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

// TestListWatch: -w prints the table, then a row for each rollout that
// changes, until interrupted.
func TestListWatch(t *testing.T) {
	store := rollouttest.NewStore(t, source.DefaultNamespace,
		listed("r1", "a", time.Hour, nil, "n1", "n2"),
		listed("r2", "b", time.Minute, map[string]string{pool.Label: "workers"}, "n3"))
	out := &syncBuffer{}
	o := &ListOptions{Namespace: source.DefaultNamespace, Selector: "!" + pool.Label, Watch: true, PrintFlags: genericclioptions.NewPrintFlags(""),
		IOStreams: genericiooptions.IOStreams{Out: out, ErrOut: out}, Printer: table.Printer(rolloutTable(false)), Store: store, interval: 10 * time.Millisecond}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	waitFor := func(want string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			return out.String() == want, nil
		})
		if err != nil {
			t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
		}
	}
	const first = "" +
		"NAME   STATE     POOL     REVISION   CONFIG          NODES   DONE   AGE\n" +
		"r1     Running   <none>   <none>     kube-system/a   2       1      60m\n"
	waitFor(first)
	if _, err := store.Request(context.Background(), "r1", rollout.Paused, rollout.Running); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Request(context.Background(), "r2", rollout.Paused, rollout.Running); err != nil {
		t.Fatal(err)
	}
	waitFor(first + "r1     Paused    <none>   <none>     kube-system/a   2       1      60m\n")
	cancel()
	if err := <-done; err != nil {
		t.Errorf("interrupted -w: %v", err)
	}
}

// syncBuffer is a bytes.Buffer that a command writes while a test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
