package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kubectl-dkc/dkc/pkg/kubeclient/adapt"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

var nodesResource = schema.GroupResource{Resource: "nodes"}

func forbidden(name string) error {
	return apierrors.NewForbidden(nodesResource, name, errors.New("denied"))
}

func TestJudgeConfinement(t *testing.T) {
	tests := map[string]struct {
		other              string
		otherErr, labelErr error
		want               []string
		wantErr            string
	}{
		"both refused": {
			other: "n2", otherErr: forbidden("n2"), labelErr: forbidden("n1"),
		},
		"refused as invalid": {
			other: "n2", otherErr: apierrors.NewInvalid(schema.GroupKind{Kind: "Node"}, "n2", nil), labelErr: forbidden("n1"),
		},
		"no other node: only the label is judged": {
			labelErr: forbidden("n1"),
		},
		"both admitted": {
			other: "n2",
			want:  []string{`write Node "n2"`, `set a label on its own Node "n1"`},
		},
		"another node admitted": {
			other: "n2", labelErr: forbidden("n1"),
			want: []string{`write Node "n2"`},
		},
		"a label admitted, on a single node": {
			want: []string{`set a label on its own Node "n1"`},
		},
		"an answer that is no verdict": {
			other: "n2", otherErr: forbidden("n2"), labelErr: apierrors.NewNotFound(nodesResource, "n1"),
			wantErr: `dry-run label of Node "n1": nodes "n1" not found`,
		},
		"a transport error": {
			other: "n2", otherErr: errors.New("connection refused"), labelErr: forbidden("n1"),
			wantErr: `dry-run write of Node "n2": connection refused`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := judgeConfinement("n1", tc.other, tc.otherErr, tc.labelErr)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("can (-want +got):\n%s", diff)
			}
		})
	}
}

// fakeReviewer answers a SelfSubjectReview with user, or err.
type fakeReviewer struct {
	mu   sync.Mutex
	user string
	err  error
}

var _ IdentityReviewer = &fakeReviewer{}

func (f *fakeReviewer) Review(context.Context) (authenticationv1.UserInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return authenticationv1.UserInfo{Username: f.user}, f.err
}

// confinementEnv is an Agent whose fake apiserver admits or refuses the
// dry-run writes as an admission policy would, and records every write.
type confinementEnv struct {
	a        *Agent
	client   *fake.Clientset
	reviewer *fakeReviewer
	clk      *testingclock.FakeClock
	recorder *record.FakeRecorder

	mu sync.Mutex
	// confined: the policy refuses the two writes.
	confined bool
	// dryRuns and writes are the patches seen, as "node/subresource".
	dryRuns, writes []string
}

func newConfinementEnv(t *testing.T, user string, nodes ...string) *confinementEnv {
	t.Helper()
	var objs []runtime.Object
	for _, n := range nodes {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, UID: types.UID("uid-" + n)}})
	}
	e := &confinementEnv{
		client:   fake.NewClientset(objs...),
		reviewer: &fakeReviewer{user: user},
		clk:      testingclock.NewFakeClock(t0),
		recorder: record.NewFakeRecorder(10),
	}
	// The fake ignores dry-run and field selectors: the reactor plays the
	// apiserver and the policy for the dry runs, and keeps them unstored.
	e.client.PrependReactor("patch", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
		p := action.(k8stesting.PatchActionImpl)
		e.mu.Lock()
		defer e.mu.Unlock()
		what := p.GetName() + "/" + p.GetSubresource()
		if len(p.PatchOptions.DryRun) == 0 {
			e.writes = append(e.writes, what)
			return false, nil, nil
		}
		e.dryRuns = append(e.dryRuns, what)
		if e.confined {
			return true, nil, forbidden(p.GetName())
		}
		return true, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: p.GetName()}}, nil
	})
	e.a = &Agent{
		Client:      adapt.Clientset(e.client),
		NodeName:    nodes[0],
		Clock:       e.clk,
		Recorder:    e.recorder,
		Confinement: &Confinement{Reviewer: e.reviewer, Interval: 30 * time.Second},
	}
	return e
}

func (e *confinementEnv) setConfined(v bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.confined = v
}

func (e *confinementEnv) seen() (dryRuns, writes []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.dryRuns...), append([]string(nil), e.writes...)
}

// start runs awaitConfinement in a goroutine; its result arrives on the
// channel.
func (e *confinementEnv) start(ctx context.Context) <-chan bool {
	done := make(chan bool, 1)
	go func() { done <- e.a.awaitConfinement(ctx) }()
	return done
}

// waitWaiting waits until awaitConfinement sleeps on the fake clock.
func (e *confinementEnv) waitWaiting(t *testing.T, done <-chan bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !e.clk.HasWaiters() {
		select {
		case r := <-done:
			t.Fatalf("awaitConfinement returned %v, want it waiting", r)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("awaitConfinement did not wait on the clock")
		}
		time.Sleep(time.Millisecond)
	}
}

func result(t *testing.T, done <-chan bool) bool {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("awaitConfinement did not return")
		return false
	}
}

func TestAwaitConfinement(t *testing.T) {
	const agentUser = "system:serviceaccount:kube-system:dkc-agent"

	t.Run("confined: proceeds at once, writing nothing", func(t *testing.T) {
		e := newConfinementEnv(t, agentUser, "n1", "n2")
		e.setConfined(true)
		if !result(t, e.start(context.Background())) {
			t.Fatal("awaitConfinement = false, want true")
		}
		dryRuns, writes := e.seen()
		if diff := cmp.Diff([]string{"n2/status", "n1/status"}, dryRuns); diff != "" {
			t.Errorf("dry runs (-want +got):\n%s", diff)
		}
		if len(writes) != 0 || len(e.recorder.Events) != 0 {
			t.Errorf("writes %v and %d events, want none", writes, len(e.recorder.Events))
		}
	})

	t.Run("a node's own credential is not checked", func(t *testing.T) {
		e := newConfinementEnv(t, "system:node:n1", "n1", "n2")
		if !result(t, e.start(context.Background())) {
			t.Fatal("awaitConfinement = false, want true")
		}
		if dryRuns, writes := e.seen(); len(dryRuns)+len(writes) != 0 {
			t.Errorf("dry runs %v, writes %v; want none", dryRuns, writes)
		}
	})

	t.Run("no Confinement: no check", func(t *testing.T) {
		e := newConfinementEnv(t, agentUser, "n1")
		e.a.Confinement = nil
		if !result(t, e.start(context.Background())) {
			t.Fatal("awaitConfinement = false, want true")
		}
		if len(e.client.Actions()) != 0 {
			t.Errorf("requests %v, want none", e.client.Actions())
		}
	})

	t.Run("unconfined: reports once, waits, proceeds once the policy is in force", func(t *testing.T) {
		e := newConfinementEnv(t, agentUser, "n1", "n2")
		done := e.start(context.Background())
		e.waitWaiting(t, done)

		node, err := e.client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cond := source.Condition(node.Status.Conditions)
		wantMsg := `the agent's credential (system:serviceaccount:kube-system:dkc-agent) can write Node "n2" and set a label on its own Node "n1": ` +
			`the admission policy kubectl-dkc-agent-own-node (deploy/admission-policy.yaml) does not confine it.`
		if cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != ReasonUnconfined || !strings.HasPrefix(cond.Message, wantMsg) {
			t.Fatalf("condition %+v, want False, %s, message starting %q", cond, ReasonUnconfined, wantMsg)
		}
		for _, s := range []string{"--require-admission-policy=false", "kubectl dkc install", "No config is applied until then"} {
			if !strings.Contains(cond.Message, s) {
				t.Errorf("condition message %q does not name %q", cond.Message, s)
			}
		}
		if got := <-e.recorder.Events; got != "Warning Unconfined "+cond.Message {
			t.Errorf("event %q, want the Warning with the condition's message", got)
		}

		// Still unconfined at the next check: no second report.
		e.clk.Step(30 * time.Second)
		e.waitWaiting(t, done)
		dryRuns, writes := e.seen()
		if len(dryRuns) != 4 || len(writes) != 1 {
			t.Errorf("after two checks: dry runs %v, writes %v; want 4 dry runs and the one condition write", dryRuns, writes)
		}
		if len(e.recorder.Events) != 0 {
			t.Errorf("a second event %q for the same finding", <-e.recorder.Events)
		}

		e.setConfined(true)
		e.clk.Step(30 * time.Second)
		if !result(t, done) {
			t.Fatal("awaitConfinement = false once confined, want true")
		}
	})

	t.Run("a failing check is retried sooner and never proceeds", func(t *testing.T) {
		e := newConfinementEnv(t, agentUser, "n1")
		e.reviewer.err = errors.New("connection refused")
		ctx, cancel := context.WithCancel(context.Background())
		done := e.start(ctx)
		for _, step := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
			e.waitWaiting(t, done)
			e.clk.Step(step)
		}
		e.waitWaiting(t, done)
		if _, writes := e.seen(); len(writes) != 0 {
			t.Errorf("writes %v while the check fails, want none", writes)
		}
		cancel()
		if result(t, done) {
			t.Fatal("awaitConfinement = true after ctx ended, want false")
		}
	})

	t.Run("a single node: only the label is tried", func(t *testing.T) {
		e := newConfinementEnv(t, agentUser, "n1")
		e.setConfined(true)
		if !result(t, e.start(context.Background())) {
			t.Fatal("awaitConfinement = false, want true")
		}
		if dryRuns, _ := e.seen(); !cmp.Equal(dryRuns, []string{"n1/status"}) {
			t.Errorf("dry runs %v, want n1/status", dryRuns)
		}
	})
}
