package rollout

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// heldRun is Run of rollout r1 in the background, on a fake clock from t0:
// the tests of what holds a rollout (a window, an alert) step the clock to
// the hold's end and see the rollout finish.
type heldRun struct {
	clock *testingclock.FakeClock
	done  chan heldResult
}

type heldResult struct {
	r   *Rollout
	err error
}

// runHeld starts Run of store's r1 with opts, and waits until the
// rollout's reason is want and the driver waits on a timer (to the hold's
// end, not on a resync).
func runHeld(ctx context.Context, t *testing.T, client kubernetes.Interface, store *Store, opts Options, want string) *heldRun {
	t.Helper()
	h := &heldRun{clock: testingclock.NewFakeClock(t0), done: make(chan heldResult, 1)}
	opts.Clock, opts.Resync = h.clock, time.Hour
	go func() {
		r, err := Run(ctx, client, store, "r1", opts)
		h.done <- heldResult{r, err}
	}()
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		r, err := store.Get(ctx, "r1")
		return err == nil && r.Status.Reason == want, nil
	}); err != nil {
		t.Fatalf("rollout never said %q: %v", want, err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return h.clock.HasWaiters(), nil
	}); err != nil {
		t.Fatal("the driver set no timer")
	}
	return h
}

// noneAssigned fails t if a node of names is assigned: the hold, which
// before names, still holds.
func noneAssigned(ctx context.Context, t *testing.T, client kubernetes.Interface, names []string, before string) {
	t.Helper()
	for _, n := range names {
		node, err := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if src, _, _ := source.Assigned(node); src != nil {
			t.Errorf("node %s assigned %s %s", n, DescribeTarget(src), before)
		}
	}
}

// finished waits until Run returns, and fails t unless the rollout is
// Done with no reason. Meanwhile, whenever the driver waits on a timer, it
// steps the clock by a second: the driver renews its Lease and looks again
// every RetryPeriod of the clock, and a step the test made before the
// driver had set its next timer (a pass still running) would otherwise
// leave it waiting, on the fake clock, for ever.
func (h *heldRun) finished(t *testing.T) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case res := <-h.done:
			if res.err != nil || res.r.Status.State != Done || res.r.Status.Reason != "" {
				t.Fatalf("Run: %v, state %s, reason %q; want Done with no reason", res.err, res.r.Status.State, res.r.Status.Reason)
			}
			return
		case <-tick.C:
			if h.clock.HasWaiters() {
				h.clock.Step(time.Second)
			}
		}
	}
}
