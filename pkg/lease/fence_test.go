package lease

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
)

func newFences(t *testing.T) (a, b *Fence, clock *testingclock.FakeClock, client *fake.Clientset) {
	t.Helper()
	clock = testingclock.NewFakeClock(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	client = fake.NewClientset()
	fence := func(id string) *Fence {
		return &Fence{Client: client, Namespace: "ns", Name: "l", Identity: id, Clock: clock,
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
	}
	return fence("a"), fence("b"), clock, client
}

func tryHold(t *testing.T, f *Fence) bool {
	t.Helper()
	ok, err := f.TryHold(context.Background())
	if err != nil {
		t.Fatalf("%s: TryHold: %v", f.Identity, err)
	}
	return ok
}

// TestFenceOneHolderAtATime: a client takes the Lease; another cannot
// while it renews, nor before it saw the Lease unchanged for its duration;
// and the holder stops acting (Holding) before that.
func TestFenceOneHolderAtATime(t *testing.T) {
	a, b, clock, _ := newFences(t)
	if !tryHold(t, a) || !a.Holding() {
		t.Fatal("a did not take a free Lease")
	}
	if tryHold(t, b) {
		t.Fatal("b took the Lease a holds")
	}
	clock.Step(8 * time.Second)
	if !tryHold(t, a) {
		t.Fatal("a could not renew")
	}
	clock.Step(8 * time.Second)
	if tryHold(t, b) {
		t.Fatal("b took the Lease a renewed 8 s ago")
	}
	// a stops renewing. b saw the renewal just now: it waits a whole
	// duration from then.
	clock.Step(10 * time.Second)
	if a.Holding() {
		t.Fatal("a still acts RenewDeadline after its last renewal")
	}
	if tryHold(t, b) {
		t.Fatal("b took the Lease 10 s after it saw it change; want 15")
	}
	clock.Step(6 * time.Second)
	if !tryHold(t, b) || b.Holder() != "b" {
		t.Fatal("b did not take the Lease a stopped renewing")
	}
	if tryHold(t, a) {
		t.Fatal("a took the Lease back from b")
	}
}

func TestFenceRelease(t *testing.T) {
	a, b, _, _ := newFences(t)
	if !tryHold(t, a) {
		t.Fatal("a did not take a free Lease")
	}
	if err := a.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a.Holding() {
		t.Error("a holds the Lease it released")
	}
	if !tryHold(t, b) {
		t.Error("b could not take the Lease a released")
	}
}

// TestFenceHoldEndsTheTenure: Hold renews while the step runs, and its
// context ends RenewDeadline after the last renewal that succeeded.
func TestFenceHoldEndsTheTenure(t *testing.T) {
	a, _, clock, client := newFences(t)
	var refuse atomic.Bool
	client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refuse.Load() {
			return true, nil, errors.New("the apiserver is away")
		}
		return false, nil, nil
	})
	tenure, stop, err := a.Hold(context.Background())
	if err != nil || tenure == nil {
		t.Fatalf("Hold = %v, %v; want a tenure", tenure, err)
	}
	defer stop()
	step := func(d time.Duration) {
		t.Helper()
		for !clock.HasWaiters() {
			time.Sleep(time.Millisecond)
		}
		clock.Step(d)
		time.Sleep(20 * time.Millisecond) // let the renewal run
	}
	for range 10 { // 20 s of renewals
		step(2 * time.Second)
	}
	if tenure.Err() != nil {
		t.Fatalf("the tenure ended while the Lease was renewed: %v", context.Cause(tenure))
	}
	refuse.Store(true)
	for range 4 {
		step(2 * time.Second)
	}
	if tenure.Err() != nil {
		t.Fatalf("the tenure ended 8 s after the last renewal: %v", context.Cause(tenure))
	}
	step(2 * time.Second)
	select {
	case <-tenure.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the tenure outlived RenewDeadline without a renewal")
	}
	if !errors.Is(context.Cause(tenure), ErrLost) {
		t.Errorf("cause %v; want ErrLost", context.Cause(tenure))
	}
}

// TestFenceRefusesAWeakFence: the same timings as Election's.
func TestFenceRefusesAWeakFence(t *testing.T) {
	a, _, _, _ := newFences(t)
	a.LeaseDuration, a.RenewDeadline = 1500*time.Millisecond, 1200*time.Millisecond
	if ok, err := a.TryHold(context.Background()); ok || err == nil || !strings.Contains(err.Error(), "whole seconds") {
		t.Errorf("TryHold = %t, %v; want a refusal naming whole seconds", ok, err)
	}
}
