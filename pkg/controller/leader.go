package controller

import (
	"context"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// ErrLostLease means this replica stopped leading while it drove
// rollouts: it must exit, and another replica takes over.
var ErrLostLease = errors.New("lost the controller lease")

// Election is how the replicas elect their leader, with client-go's
// leaderelection on the Lease LeaseName.
type Election struct {
	Client    kubernetes.Interface
	Namespace string
	// Identity names this replica in the Lease: its pod's name.
	Identity string
	// LeaseDuration is how long the standby waits after the leader's last
	// renewal before it takes over; RenewDeadline is how long the leader
	// keeps trying to renew before it gives up; RetryPeriod is how often
	// both try.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Run waits until this replica leads, then calls lead with a context that
// ends when it stops leading. It returns ctx's error when ctx ended, and
// ErrLostLease when the lease was lost first. On the way out the lease is
// released, so that a standby takes over at once.
func (e *Election) Run(ctx context.Context, lead func(context.Context)) error {
	logger := klog.FromContext(ctx)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.Namespace, Name: LeaseName},
		Client:     e.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.Identity},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            LeaseName,
		LeaseDuration:   e.LeaseDuration,
		RenewDeadline:   e.RenewDeadline,
		RetryPeriod:     e.RetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logger.Info("Leading", "lease", e.Namespace+"/"+LeaseName, "identity", e.Identity)
				lead(ctx)
			},
			OnStoppedLeading: func() {
				logger.Info("Stopped leading", "identity", e.Identity)
			},
			OnNewLeader: func(identity string) {
				if identity != e.Identity {
					logger.Info("Standing by", "leader", identity)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	le.Run(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return ErrLostLease
}
