package lease

import (
	"bytes"
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// Fence holds the Lease Namespace/Name for a client that acts in steps (a
// controller's reconciles), with no goroutine of its own between them:
// each step calls Hold, which takes or renews the Lease unless another
// client holds it, and acts under the context it returns, which ends when
// the holder must stop acting. The rules are client-go leaderelection's:
// another client takes over only after it saw the Lease unchanged for
// LeaseDuration, and the holder stops acting RenewDeadline after its last
// renewal, before that.
//
// A Fence is used by one step at a time.
type Fence struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string
	// Identity names this client in the Lease.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are as in Election.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Clock defaults to the real clock.
	Clock clock.Clock

	lock *resourcelock.LeaseLock
	// observed is the record last read or written, raw its bytes as read,
	// and seen when it last changed (this client's clock).
	observed *resourcelock.LeaderElectionRecord
	raw      []byte
	seen     time.Time
	// renewed is when this client last took or renewed the Lease (before
	// it sent the write); zero when it does not hold it.
	renewed time.Time
}

func (f *Fence) init() error {
	if f.lock != nil {
		return nil
	}
	f.LeaseDuration = orDefault(f.LeaseDuration, DefaultLeaseDuration)
	f.RenewDeadline = orDefault(f.RenewDeadline, DefaultRenewDeadline)
	f.RetryPeriod = orDefault(f.RetryPeriod, DefaultRetryPeriod)
	if err := checkTimings(f.Namespace, f.Name, f.LeaseDuration, f.RenewDeadline); err != nil {
		return err
	}
	if f.Clock == nil {
		f.Clock = clock.RealClock{}
	}
	f.lock = &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: f.Namespace, Name: f.Name},
		Client:     f.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: f.Identity},
	}
	return nil
}

// Holding reports whether this client holds the Lease and may act: it
// renewed it less than RenewDeadline ago.
func (f *Fence) Holding() bool {
	return !f.renewed.IsZero() && f.Clock.Since(f.renewed) < f.RenewDeadline
}

// Holder returns the identity the Lease last named, as this client last
// read or wrote it.
func (f *Fence) Holder() string {
	if f.observed == nil {
		return ""
	}
	return f.observed.HolderIdentity
}

// TryHold takes the Lease, or renews it when this client holds it and
// last renewed it RetryPeriod ago or more, unless another client holds it:
// one that renewed it within LeaseDuration, as far as this client saw. It
// reports whether this client holds it now.
func (f *Fence) TryHold(ctx context.Context) (bool, error) {
	if err := f.init(); err != nil {
		return false, err
	}
	now := f.Clock.Now()
	rec := resourcelock.LeaderElectionRecord{
		HolderIdentity:       f.Identity,
		LeaseDurationSeconds: int(f.LeaseDuration / time.Second),
		AcquireTime:          metav1.NewTime(now),
		RenewTime:            metav1.NewTime(now),
	}
	if f.Holding() && f.Clock.Since(f.renewed) < f.RetryPeriod {
		return true, nil // renewed recently enough
	}
	if f.Holding() {
		// The fast path: the Lease as this client last wrote it.
		rec.AcquireTime, rec.LeaderTransitions = f.observed.AcquireTime, f.observed.LeaderTransitions
		if err := f.lock.Update(ctx, rec); err == nil {
			f.wrote(rec, now)
			return true, nil
		}
	}
	old, raw, err := f.lock.Get(ctx)
	switch {
	case apierrors.IsNotFound(err):
		if err := f.lock.Create(ctx, rec); err != nil {
			f.renewed = time.Time{}
			return false, f.failed("create", err)
		}
		f.wrote(rec, now)
		return true, nil
	case err != nil:
		return false, f.failed("read", err)
	}
	if !bytes.Equal(raw, f.raw) {
		f.observed, f.raw, f.seen = old, raw, now
	}
	mine := old.HolderIdentity == f.Identity
	if !mine && old.HolderIdentity != "" && now.Before(f.seen.Add(time.Duration(old.LeaseDurationSeconds)*time.Second)) {
		f.renewed = time.Time{}
		return false, nil
	}
	if mine {
		rec.AcquireTime, rec.LeaderTransitions = old.AcquireTime, old.LeaderTransitions
	} else {
		rec.LeaderTransitions = old.LeaderTransitions + 1
	}
	if err := f.lock.Update(ctx, rec); err != nil {
		f.renewed = time.Time{}
		if apierrors.IsConflict(err) {
			return false, nil // another client wrote it first
		}
		return false, f.failed("take", err)
	}
	f.wrote(rec, now)
	return true, nil
}

func (f *Fence) wrote(rec resourcelock.LeaderElectionRecord, at time.Time) {
	f.observed, f.raw, f.seen, f.renewed = &rec, nil, at, at
}

func (f *Fence) failed(what string, err error) error {
	if apierrors.IsForbidden(err) {
		return err
	}
	return fmt.Errorf("%s lease %s/%s: %w", what, f.Namespace, f.Name, err)
}

// Hold is TryHold for a step that may last longer than RenewDeadline: when
// this client holds the Lease, it returns a context that ends when this
// client must stop acting, and keeps renewing the Lease every RetryPeriod
// until stop is called. It returns a nil context when another client
// holds the Lease. stop must be called either way.
func (f *Fence) Hold(ctx context.Context) (tenure context.Context, stop func(), err error) {
	ok, err := f.TryHold(ctx)
	if !ok || err != nil {
		return nil, func() {}, err
	}
	tenure, cancel := context.WithCancelCause(ctx)
	quit, done := make(chan struct{}), make(chan struct{})
	lost := fmt.Errorf("lease %s/%s: %w", f.Namespace, f.Name, ErrLost)
	go func() {
		defer close(done)
		deadline := f.Clock.NewTimer(f.RenewDeadline - f.Clock.Since(f.renewed))
		defer func() { deadline.Stop() }()
		tick := f.Clock.NewTimer(f.RetryPeriod)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tenure.Done():
				return
			case <-deadline.C():
				cancel(lost)
				return
			case <-tick.C():
			}
			ok, err := f.TryHold(tenure)
			switch {
			case ok:
				deadline.Stop()
				deadline = f.Clock.NewTimer(f.RenewDeadline - f.Clock.Since(f.renewed))
			case err == nil:
				cancel(lost) // another client holds it
				return
			}
			tick.Reset(f.RetryPeriod)
		}
	}()
	return tenure, func() {
		close(quit)
		<-done
		cancel(nil)
	}, nil
}

// Release gives the Lease up when this client holds it, so that another
// client takes over at once rather than after LeaseDuration.
func (f *Fence) Release(ctx context.Context) error {
	if f.lock == nil || f.renewed.IsZero() {
		return nil
	}
	f.renewed = time.Time{}
	now := metav1.NewTime(f.Clock.Now())
	rec := resourcelock.LeaderElectionRecord{LeaderTransitions: f.observed.LeaderTransitions, LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now}
	if err := f.lock.Update(ctx, rec); err != nil {
		return f.failed("release", err)
	}
	f.observed, f.raw = &rec, nil
	return nil
}
