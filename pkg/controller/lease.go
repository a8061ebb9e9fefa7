// Package controller drives rollouts in the cluster: the engine of
// pkg/rollout, hosted by `kubectl dkc controller`, a Deployment whose
// replicas elect one leader through a Lease. The CLI hosts the same engine
// when no controller runs.
package controller

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// LeaseName is the Lease in the config namespace that the controller's
// replicas elect their leader with.
const LeaseName = "kubectl-dkc-controller"

// Leader returns the identity of the controller replica that holds the
// Lease in namespace and renewed it within its duration at now, or "" when
// none does: no controller drives rollouts there.
func Leader(ctx context.Context, client kubernetes.Interface, namespace string, now time.Time) (string, error) {
	lease, err := client.CoordinationV1().Leases(namespace).Get(ctx, LeaseName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case apierrors.IsForbidden(err):
		return "", fmt.Errorf("cannot tell whether a controller runs: %w (the role kubectl-dkc:rollout-operator grants get on lease %s)", err, LeaseName)
	case err != nil:
		return "", fmt.Errorf("read lease %s/%s: %w", namespace, LeaseName, err)
	}
	s := lease.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return "", nil
	}
	if now.After(s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second)) {
		return "", nil
	}
	return *s.HolderIdentity, nil
}
