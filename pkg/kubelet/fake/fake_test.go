package fake

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-dkc/dkc/pkg/kubelet"
)

func TestFakeWriter(t *testing.T) {
	w := &FakeWriter{LocalConfig: []byte("local"), Current: []byte("local")}
	if err := w.Apply([]byte("new")); err != nil {
		t.Fatal(err)
	}
	if got, _ := w.Effective(); string(got) != "new" {
		t.Errorf("Effective after Apply = %q, want %q", got, "new")
	}
	w.ApplyErr = errors.New("disk full")
	if err := w.Apply([]byte("newer")); err == nil || err.Error() != "disk full" {
		t.Errorf("Apply error = %v, want disk full", err)
	}
	if err := w.Restore(); err != nil {
		t.Fatal(err)
	}
	if got, _ := w.Effective(); string(got) != "local" {
		t.Errorf("Effective after Restore = %q, want %q", got, "local")
	}
	// Restore leaves a config alone that was not applied, as the real
	// writers do.
	w.Current = []byte("operator's")
	if err := w.Restore(); err != nil {
		t.Fatal(err)
	}
	if got, _ := w.Effective(); string(got) != "operator's" {
		t.Errorf("Effective after Restore without Apply = %q, want %q", got, "operator's")
	}
	// Not owned: the file as it is is the local config, as a real writer
	// without a baseline or drop-in takes it.
	for _, tc := range []struct{ payload, want string }{{"p", "p"}, {"", "operator's"}} {
		var payload []byte
		if tc.payload != "" {
			payload = []byte(tc.payload)
		}
		if got, err := w.Preview(payload); err != nil || string(got) != tc.want {
			t.Errorf("Preview(%q) = %q, %v; want %q", tc.payload, got, err, tc.want)
		}
	}
	want := []string{"Apply", "Effective", "Apply", "Restore", "Effective", "Restore", "Effective", "Preview", "Preview"}
	if diff := cmp.Diff(want, w.Calls); diff != "" {
		t.Errorf("Calls (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][]byte{[]byte("new"), []byte("newer")}, w.Applied); diff != "" {
		t.Errorf("Applied (-want +got):\n%s", diff)
	}
}

func TestFakeRestarter(t *testing.T) {
	failed := errors.New("job failed")
	var hooked []string
	r := &FakeRestarter{RestartErrs: []error{failed}, OnCall: func(m string) { hooked = append(hooked, m) }}
	ctx := context.Background()
	got := []error{r.Restart(ctx), r.Restart(ctx), r.Stop(ctx), r.Start(ctx)}
	if diff := cmp.Diff([]error{failed, nil, nil, nil}, got, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	want := []string{"Restart", "Restart", "Stop", "Start"}
	if diff := cmp.Diff(want, r.CallsSnapshot()); diff != "" {
		t.Errorf("Calls (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, hooked); diff != "" {
		t.Errorf("OnCall (-want +got):\n%s", diff)
	}
}

func TestFakeProber(t *testing.T) {
	unhealthy := errors.New("health gate: configz: maxPods is 110, want 42")
	p := &FakeProber{Results: []error{unhealthy}}
	ctx := context.Background()
	if err := p.Probe(ctx, kubelet.Expectation{Config: []byte("a")}); err != unhealthy {
		t.Errorf("first Probe = %v, want %v", err, unhealthy)
	}
	if err := p.Probe(ctx, kubelet.Expectation{Config: []byte("b")}); err != nil {
		t.Errorf("second Probe = %v, want nil", err)
	}
	if len(p.Expectations) != 2 || string(p.Expectations[1].Config) != "b" {
		t.Errorf("Expectations = %v, want a and b", p.Expectations)
	}

	blocking := &FakeProber{Block: true}
	ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err := blocking.Probe(ctx, kubelet.Expectation{})
	if got, want := err.Error(), "health gate: context deadline exceeded"; got != want {
		t.Errorf("blocking Probe = %q, want %q", got, want)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, kubelet.ErrHealthGate) {
		t.Errorf("blocking Probe error does not wrap context.DeadlineExceeded and kubelet.ErrHealthGate")
	}
}
