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
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dkc/dkc/pkg/lease"
)

// LeaseName is the Lease in the config namespace that the controller's
// replicas elect their leader with.
const LeaseName = "kubectl-dkc-controller"

// Leader returns the identity of the controller replica that holds the
// Lease in namespace and renewed it within its duration at now, or "" when
// none does: no controller drives rollouts there.
func Leader(ctx context.Context, client kubernetes.Interface, namespace string, now time.Time) (string, error) {
	holder, err := lease.Holder(ctx, client, namespace, LeaseName, now)
	if apierrors.IsForbidden(err) {
		return "", fmt.Errorf("cannot tell whether a controller runs: %w (the role kubectl-dkc:rollout-operator grants get on lease %s)", err, LeaseName)
	}
	return holder, err
}
