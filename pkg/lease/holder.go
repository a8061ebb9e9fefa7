// Package lease fences work that one client at a time may do: the
// controller's replicas elect one leader, and each rollout has one driver.
// Both use client-go's leaderelection on a coordination.k8s.io Lease.
package lease

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Holder returns the identity that holds the Lease namespace/name and
// renewed it within its duration at now, or "" when none does. A Forbidden
// answer is returned as it is, for the caller to say which role grants it.
func Holder(ctx context.Context, client kubernetes.Interface, namespace, name string, now time.Time) (string, error) {
	lease, err := client.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case apierrors.IsForbidden(err):
		return "", err
	case err != nil:
		return "", fmt.Errorf("read lease %s/%s: %w", namespace, name, err)
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
