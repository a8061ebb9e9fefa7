package controller

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
)

// A rollout spends the controller's rate limit in bursts (50 QPS, burst
// 100); a lease renewal that waited behind such a burst would lose the
// lease. The leader election's client must have a limiter of its own.
func TestLeaseRenewalsDoNotWaitForTheRolloutsRateLimit(t *testing.T) {
	o := &Options{IOStreams: genericiooptions.NewTestIOStreamsDiscard(), Identity: "test", QPS: 50, Burst: 100}
	if err := o.Complete(testKubeconfig(t), &cobra.Command{}, nil); err != nil {
		t.Fatal(err)
	}
	rollouts := o.Kube.CoreV1().RESTClient().GetRateLimiter()
	for rollouts.TryAccept() {
		// spend the rollouts' whole burst
	}
	if !o.Lease.CoordinationV1().RESTClient().GetRateLimiter().TryAccept() {
		t.Error("with the rollouts' rate limit spent, a lease renewal must wait: the lease's client shares their limiter")
	}
}

// testKubeconfig is a RESTClientGetter for a kubeconfig of an apiserver
// at 127.0.0.1:1, where nothing listens.
func testKubeconfig(t *testing.T) *genericclioptions.ConfigFlags {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: t}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	return flags
}

// --kube-api-qps and --kube-api-burst are the rollouts' rate limit; the
// leader election gets the same limit, on a limiter of its own.
func TestRateLimitFlags(t *testing.T) {
	o := &Options{IOStreams: genericiooptions.NewTestIOStreamsDiscard(), Identity: "test", QPS: 200, Burst: 400,
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := o.Complete(testKubeconfig(t), &cobra.Command{}, nil); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]kubernetes.Interface{"rollouts": o.Kube, "lease": o.Lease} {
		if got := c.CoreV1().RESTClient().GetRateLimiter().QPS(); got != 200 {
			t.Errorf("%s client: %g QPS, want 200", name, got)
		}
	}
	for _, bad := range []struct {
		qps   float32
		burst int
	}{{0, 100}, {50, 0}, {-1, 100}} {
		o.QPS, o.Burst = bad.qps, bad.burst
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--kube-api-qps") {
			t.Errorf("--kube-api-qps=%g --kube-api-burst=%d: error %v, want one naming the flags", bad.qps, bad.burst, err)
		}
	}
}
