// The Ready check: the apiserver's word that a kubelet started after the
// restart reports Ready, and which failures of it mean that the apiserver
// gave no answer.

package kubelet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// apiserverAway reports whether err means the apiserver gave no answer:
// no HTTP response at all (connection refused, reset, timeout), 429, or a
// 5xx. Any other status (NotFound, Forbidden) is an answer.
func apiserverAway(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code >= http.StatusInternalServerError || code == http.StatusTooManyRequests
	}
	var answered *answeredError
	return !errors.As(err, &answered)
}

// answeredError is a Ready check that failed on what the apiserver
// answered: the Node not Ready, or its Lease or heartbeat from before the
// restart.
type answeredError struct{ msg string }

func (e *answeredError) Error() string { return e.msg }

func answeredf(format string, args ...any) error {
	return &answeredError{msg: fmt.Sprintf(format, args...)}
}

// readyState is what checkReady remembers across one Probe's attempts.
type readyState struct {
	since time.Time
	// leaseSeen is when this Probe first saw the Lease renewed after since.
	leaseSeen time.Time
	// running is Expectation.Running until it has been called.
	running func()
}

// checkReady requires Ready=True, reported by a kubelet that started after
// since.
//
// The Lease's renewTime has microseconds: a renewal after since proves a
// kubelet runs that started after it. The Ready condition's heartbeat has
// whole seconds: one in a later second than since is fresh, one in an earlier
// second is stale, and one in since's own second may be either. A kubelet
// always posts its status right after it starts (within about a second of
// its first Lease renewal, measured), so an ambiguous heartbeat counts once
// readySettle passed since the renewal was first seen: by then a fresh status
// would have replaced a stale one, or shown NotReady.
func (p *HealthProber) checkReady(ctx context.Context, st *readyState) error {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	node, err := p.cfg.Client.Nodes().Get(ctx, p.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	var ready *corev1.NodeCondition
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			ready = &node.Status.Conditions[i]
		}
	}
	if ready == nil {
		return answeredf("no Ready condition")
	}
	if ready.Status != corev1.ConditionTrue {
		return answeredf("Ready is %s: %s: %s", ready.Status, ready.Reason, ready.Message)
	}
	since := st.since
	if since.IsZero() {
		return nil
	}
	lease, err := p.cfg.Client.Leases(nodeLeaseNamespace).Get(ctx, p.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	if renew := leaseRenewTime(lease); !renew.After(since) {
		return answeredf("lease renewed at %s, not after the restart at %s",
			renew.UTC().Format(time.RFC3339Nano), since.UTC().Format(time.RFC3339Nano))
	}
	now := p.now()
	if st.leaseSeen.IsZero() {
		st.leaseSeen = now
	}
	heartbeat := ready.LastHeartbeatTime.Time
	switch {
	case heartbeat.After(since):
		return nil
	case heartbeat.Before(since.Truncate(time.Second)):
		return answeredf("Ready heartbeat %s is from before the restart at %s",
			heartbeat.UTC().Format(time.RFC3339), since.UTC().Format(time.RFC3339Nano))
	case now.Sub(st.leaseSeen) < p.settle:
		return answeredf("Ready heartbeat %s is from the second of the restart at %s; waiting up to %s for a later one",
			heartbeat.UTC().Format(time.RFC3339), since.UTC().Format(time.RFC3339Nano), p.settle)
	}
	return nil
}

func leaseRenewTime(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}
