package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
)

// Node Leases as a kubelet keeps them (pkg/kubelet/nodelease upstream): one
// per Node in kube-node-lease, named after the node and owned by it, with a
// duration of 40 s, renewed by a PUT every quarter of that.
const (
	nodeLeaseNamespace = "kube-node-lease"
	nodeLeaseDuration  = 40 * time.Second
	nodeLeaseRenew     = nodeLeaseDuration / 4
)

// leaseRenewer renews the simulated nodes' Leases, each on its own 10 s
// tick from a random offset, as a fleet of kubelets does. It counts its own
// requests and the bytes of their bodies, so that a benchmark can tell the
// kubelets' share of the apiserver's traffic from dkc's.
type leaseRenewer struct {
	cancel          context.CancelFunc
	wg              sync.WaitGroup
	requests, bytes atomic.Int64
	// failures counts the renewals that failed, and their reads.
	failures atomic.Int64
}

// renewLeases creates a Lease for each of nodes and renews it until stop.
func renewLeases(ctx context.Context, cfg *rest.Config, nodes []*corev1.Node) (*leaseRenewer, error) {
	l := &leaseRenewer{}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0 // a kubelet each: no shared client-side limit
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			l.requests.Add(1)
			if r.ContentLength > 0 {
				l.bytes.Add(r.ContentLength)
			}
			return rt.RoundTrip(r)
		})
	}
	client, err := util.NewClientset(cfg) // protobuf, as a kubelet speaks (its --kube-api-content-type)
	if err != nil {
		return nil, err
	}
	leases := make([]*coordinationv1.Lease, len(nodes))
	for i, n := range nodes {
		got, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get node %s for its lease: %w", n.Name, err)
		}
		now := metav1.NewMicroTime(time.Now())
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, Namespace: nodeLeaseNamespace,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: got.UID}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(n.Name),
				LeaseDurationSeconds: ptr.To(int32(nodeLeaseDuration / time.Second)), RenewTime: &now},
		}
		if leases[i], err = client.CoordinationV1().Leases(nodeLeaseNamespace).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create the lease of node %s: %w", n.Name, err)
		}
	}
	ctx, l.cancel = context.WithCancel(ctx)
	for _, lease := range leases {
		l.wg.Go(func() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(rand.N(nodeLeaseRenew)):
			}
			t := time.NewTicker(nodeLeaseRenew)
			defer t.Stop()
			for {
				if got, err := l.renew(ctx, client, lease); err == nil {
					lease = got
				}
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		})
	}
	return l, nil
}

// renew renews lease, as last written, as a kubelet does: when that
// fails, it reads the Lease again and renews what it read. A PUT that timed
// out at the client may have been written; its resourceVersion is then
// old, and every later PUT of it would conflict.
func (l *leaseRenewer) renew(ctx context.Context, client kubernetes.Interface, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	leases := client.CoordinationV1().Leases(nodeLeaseNamespace)
	now := metav1.NewMicroTime(time.Now())
	lease.Spec.RenewTime = &now
	got, err := leases.Update(ctx, lease, metav1.UpdateOptions{})
	if err == nil {
		return got, nil
	}
	if ctx.Err() == nil {
		l.failures.Add(1)
	}
	latest, err := leases.Get(ctx, lease.Name, metav1.GetOptions{})
	if err == nil {
		now = metav1.NewMicroTime(time.Now())
		latest.Spec.RenewTime = &now
		got, err = leases.Update(ctx, latest, metav1.UpdateOptions{})
	}
	if err != nil && ctx.Err() == nil {
		l.failures.Add(1)
	}
	return got, err
}

// stop ends the renewals.
func (l *leaseRenewer) stop() {
	l.cancel()
	l.wg.Wait()
}

// leaseCounts is what the renewer has sent so far.
type leaseCounts struct{ requests, bytes int64 }

func (l *leaseRenewer) snapshot() leaseCounts {
	return leaseCounts{requests: l.requests.Load(), bytes: l.bytes.Load()}
}
