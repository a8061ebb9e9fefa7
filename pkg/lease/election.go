package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// ErrLost means the holder stopped holding the Lease while it worked:
// another client may hold it now.
var ErrLost = errors.New("lost the lease")

// Default timings: the holder renews every RetryPeriod, gives up after
// RenewDeadline without a renewal, and another client takes over
// LeaseDuration after the last renewal. RenewDeadline < LeaseDuration is
// the fence: a holder stops acting before anyone else may start.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// Election runs work while it holds the Lease Namespace/Name, with
// client-go's leaderelection.
type Election struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string
	// Identity names this client in the Lease.
	Identity string
	// LeaseDuration is how long the others wait after the holder's last
	// renewal before they take over; RenewDeadline is how long the holder
	// keeps trying to renew before it gives up; RetryPeriod is how often
	// both try. Zero means the Default of each.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// OnNewHolder, when set, is told each identity seen holding the
	// Lease, this client's included.
	OnNewHolder func(identity string)
}

// Run waits until this client holds the Lease, then calls lead with a
// context that ends when it stops holding it. It returns ctx's error when
// ctx ended, and an error matching ErrLost when the Lease was lost first.
// On the way out the Lease is released, so that another client takes over
// at once.
func (e *Election) Run(ctx context.Context, lead func(context.Context)) error {
	logger := klog.FromContext(ctx)
	duration, deadline := orDefault(e.LeaseDuration, DefaultLeaseDuration), orDefault(e.RenewDeadline, DefaultRenewDeadline)
	if err := checkTimings(e.Namespace, e.Name, duration, deadline); err != nil {
		return err
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.Namespace, Name: e.Name},
		Client:     e.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.Identity},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            e.Name,
		LeaseDuration:   duration,
		RenewDeadline:   deadline,
		RetryPeriod:     orDefault(e.RetryPeriod, DefaultRetryPeriod),
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logger.V(2).Info("Holding lease", "lease", e.Namespace+"/"+e.Name, "identity", e.Identity)
				lead(ctx)
			},
			OnStoppedLeading: func() {
				logger.V(2).Info("Released lease", "lease", e.Namespace+"/"+e.Name, "identity", e.Identity)
			},
			OnNewLeader: func(identity string) {
				if identity != e.Identity {
					logger.V(2).Info("Lease held by another", "lease", e.Namespace+"/"+e.Name, "holder", identity)
				}
				if e.OnNewHolder != nil {
					e.OnNewHolder(identity)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("lease %s/%s: %w", e.Namespace, e.Name, err)
	}
	le.Run(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("lease %s/%s: %w", e.Namespace, e.Name, ErrLost)
}

// checkTimings refuses a fence that does not hold. The Lease stores whole
// seconds: a duration of 1.5 s would let another client take over after
// 1 s, before a holder with a deadline of 1.2 s stops. So a duration must
// be whole seconds, longer than the deadline.
func checkTimings(namespace, name string, duration, deadline time.Duration) error {
	if duration%time.Second != 0 || duration <= deadline {
		return fmt.Errorf("lease %s/%s: a duration of %s and a renew deadline of %s: the duration must be whole seconds, longer than the deadline", namespace, name, duration, deadline)
	}
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
