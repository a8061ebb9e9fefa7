// Package fake holds scripted fakes of pkg/kubelet's Writer, Restarter and
// Prober, for tests of the node agent's logic. They are safe for concurrent
// use.
package fake

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/kubectl-dkc/dkc/pkg/flagz"
	"github.com/kubectl-dkc/dkc/pkg/kubelet"
)

// FakeWriter is a kubelet.Writer that keeps the config in memory.
type FakeWriter struct {
	mu sync.Mutex
	// WriterMode is what Mode returns; default kubelet.DropIn.
	WriterMode kubelet.ApplyMode
	// LocalConfig is what Local returns.
	LocalConfig []byte
	// Current is the config as the kubelet would load it: Apply sets it to
	// the payload and Restore to LocalConfig. Effective returns it.
	Current []byte
	// Owned means dkc's config is in place, as a real writer's baseline or
	// drop-in says: Apply sets it. Restore, when it is set, makes
	// LocalConfig Current and clears it; otherwise Restore changes nothing,
	// as the real writers leave a config alone that dkc never wrote.
	Owned bool
	// Applied records every payload passed to Apply, successful or not.
	Applied [][]byte
	// Calls records the method names called, in order.
	Calls []string
	// LocalErr, ApplyErr, RestoreErr, EffectiveErr and PreviewErr, when
	// set, are returned by their method, which then changes nothing.
	LocalErr, ApplyErr, RestoreErr, EffectiveErr, PreviewErr error
}

var _ kubelet.Writer = &FakeWriter{}

// Mode returns WriterMode, or kubelet.DropIn.
func (w *FakeWriter) Mode() kubelet.ApplyMode {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.Calls = append(w.Calls, "Mode")
	if w.WriterMode == "" {
		return kubelet.DropIn
	}
	return w.WriterMode
}

// Local returns LocalConfig.
func (w *FakeWriter) Local() ([]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.Calls = append(w.Calls, "Local")
	if w.LocalErr != nil {
		return nil, w.LocalErr
	}
	return w.LocalConfig, nil
}

// Apply records payload and makes it Current.
func (w *FakeWriter) Apply(payload []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.Calls = append(w.Calls, "Apply")
	w.Applied = append(w.Applied, payload)
	if w.ApplyErr != nil {
		return w.ApplyErr
	}
	w.Current = payload
	w.Owned = true
	return nil
}

// Restore makes LocalConfig Current if Owned, and clears Owned.
func (w *FakeWriter) Restore() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.Calls = append(w.Calls, "Restore")
	if w.RestoreErr != nil {
		return w.RestoreErr
	}
	if w.Owned {
		w.Current = w.LocalConfig
		w.Owned = false
	}
	return nil
}

// Preview returns payload, or for a nil payload LocalConfig (Current when
// not Owned, as a real writer without a baseline or drop-in takes the file
// as it is for the local config): the fake has no drop-ins to merge.
func (w *FakeWriter) Preview(payload []byte) ([]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.Calls = append(w.Calls, "Preview")
	if w.PreviewErr != nil {
		return nil, w.PreviewErr
	}
	if payload == nil {
		if !w.Owned {
			return w.Current, nil
		}
		return w.LocalConfig, nil
	}
	return payload, nil
}

// Effective returns Current.
func (w *FakeWriter) Effective() ([]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.Calls = append(w.Calls, "Effective")
	if w.EffectiveErr != nil {
		return nil, w.EffectiveErr
	}
	return w.Current, nil
}

// FakeRestarter is a kubelet.Restarter that records its calls and returns
// scripted errors.
type FakeRestarter struct {
	mu sync.Mutex
	// Calls records "Restart", "Stop" and "Start", in order.
	Calls []string
	// RestartErrs, StopErrs and StartErrs are returned by successive calls
	// of their method; once used up, calls succeed.
	RestartErrs, StopErrs, StartErrs []error
	// OnCall, when set, runs at each call with the method's name, before
	// its result is returned; a test uses it to change the world.
	OnCall func(method string)
}

var _ kubelet.Restarter = &FakeRestarter{}

// Restart records the call and returns the next of RestartErrs.
func (r *FakeRestarter) Restart(ctx context.Context) error { return r.call("Restart", &r.RestartErrs) }

// Stop records the call and returns the next of StopErrs.
func (r *FakeRestarter) Stop(ctx context.Context) error { return r.call("Stop", &r.StopErrs) }

// Start records the call and returns the next of StartErrs.
func (r *FakeRestarter) Start(ctx context.Context) error { return r.call("Start", &r.StartErrs) }

func (r *FakeRestarter) call(method string, errs *[]error) error {
	r.mu.Lock()
	r.Calls = append(r.Calls, method)
	var err error
	if len(*errs) > 0 {
		err, *errs = (*errs)[0], (*errs)[1:]
	}
	hook := r.OnCall
	r.mu.Unlock()
	if hook != nil {
		hook(method)
	}
	return err
}

// CallsSnapshot returns a copy of Calls.
func (r *FakeRestarter) CallsSnapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.Calls...)
}

// FakeProber is a kubelet.Prober that records what it was asked and returns
// scripted results.
type FakeProber struct {
	mu sync.Mutex
	// Expectations records the argument of every call.
	Expectations []kubelet.Expectation
	// Results are returned by successive calls; once used up, Default is.
	Results []error
	Default error
	// Block makes Probe wait for its ctx to end and return an error
	// wrapping kubelet.ErrHealthGate and ctx's error, after recording the call.
	Block bool
	// OnProbe, when set, runs at each call after it is recorded and before
	// it returns, without the lock held: a test's stand-in for what the
	// real probe sees meanwhile, such as calling want.Running.
	OnProbe func(want kubelet.Expectation)
	// Live is what Running returns: the kubelet's configz; nil makes
	// Running fail, as for a kubelet that does not answer.
	Live []byte
	// KubeletFlags is what Flags returns: the kubelet's /flagz; nil makes
	// Flags fail with flagz.ErrNotServed, as for a kubelet before 1.36.
	KubeletFlags map[string]string
}

var _ kubelet.Prober = &FakeProber{}

// Flags returns KubeletFlags, or flagz.ErrNotServed when it is nil.
func (p *FakeProber) Flags(ctx context.Context, current []byte) (map[string]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.KubeletFlags == nil {
		return nil, fmt.Errorf("fake kubelet: %w", flagz.ErrNotServed)
	}
	return maps.Clone(p.KubeletFlags), nil
}

// Running returns Live, or an error when Live is nil.
func (p *FakeProber) Running(ctx context.Context, current []byte) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Live == nil {
		return nil, errors.New("fake kubelet: no configz")
	}
	return p.Live, nil
}

// Probe records want and returns the next result.
func (p *FakeProber) Probe(ctx context.Context, want kubelet.Expectation) error {
	p.mu.Lock()
	p.Expectations = append(p.Expectations, want)
	if on := p.OnProbe; on != nil {
		p.mu.Unlock()
		on(want)
		p.mu.Lock()
	}
	if p.Block {
		p.mu.Unlock()
		<-ctx.Done()
		return fmt.Errorf("%w: %w", kubelet.ErrHealthGate, ctx.Err())
	}
	defer p.mu.Unlock()
	if len(p.Results) > 0 {
		err := p.Results[0]
		p.Results = p.Results[1:]
		return err
	}
	return p.Default
}
