package agent

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubectl-dkc/dkc/pkg/checkpoint"
)

// Started is the point where a service manager may start the kubelet
// (kubectl-dkc-agent.service is Type=notify; the agent command sends READY=1
// there, or earlier as start-up's own kubelet job is queued): it runs once,
// after start-up wrote the config the record names, and before the agent's
// first request to the apiserver, so before the first sync.
func TestStartedAfterStartupWrite(t *testing.T) {
	e := newEnv(t)
	// The record names ConfigMap a; the kubelet's config is still the
	// local one, as after a reboot between the record and the write.
	save(t, e, "a", cfgA)
	now := e.clk.Now()
	must(t, e.store.SetState(checkpoint.State{Assigned: ref("a", "1"), AssignedAt: &now}))
	e.configMap(t, "a", cfgA, nil)
	e.assign(t, "a")
	e.client.ClearActions()

	type seen struct {
		Config   string
		Requests int
	}
	var calls atomic.Int32
	atStart := make(chan seen, 1)
	e.a.Started = func() {
		calls.Add(1)
		cur, err := e.writer.Effective()
		if err != nil {
			t.Error(err)
		}
		atStart <- seen{Config: string(cur), Requests: len(e.client.Actions())}
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	select {
	case got := <-atStart:
		diff(t, "at Started: the kubelet's config and the API requests made",
			seen{Config: cfgA, Requests: 0}, got)
	case err := <-done:
		t.Fatalf("Run returned before Started: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Started was not called within 10s")
	}

	// The first sync follows and reports the config start-up put in place.
	deadline := time.Now().Add(10 * time.Second)
	for e.status(t) == nil || e.status(t).Active == nil {
		if time.Now().After(deadline) {
			t.Fatalf("no status with an active config after 10s; node status is %+v", e.status(t))
		}
		time.Sleep(10 * time.Millisecond)
	}
	diff(t, "status's active config", ref("a", "1"), e.status(t).Active)
	diff(t, "Started calls", int32(1), calls.Load())
}

// A start-up that fails never calls Started: the service manager sees the
// agent exit instead of becoming ready.
func TestStartedNotCalledWhenStartupFails(t *testing.T) {
	e := newEnv(t)
	e.writer.EffectiveErr = errors.New("permission denied")
	var calls atomic.Int32
	e.a.Started = func() { calls.Add(1) }

	err := e.a.Run(context.Background())
	if want := "startup: read kubelet config: permission denied"; err == nil || err.Error() != want {
		t.Fatalf("Run: got error %v, want %q", err, want)
	}
	diff(t, "Started calls", int32(0), calls.Load())
}
