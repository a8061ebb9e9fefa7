package controller

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// A rollout spends the controller's rate limit in bursts (50 QPS, burst
// 100); a lease renewal that waited behind such a burst would lose the
// lease. The leader election's client must have a limiter of its own.
func TestLeaseRenewalsDoNotWaitForTheRolloutsRateLimit(t *testing.T) {
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
	o := &Options{IOStreams: genericiooptions.NewTestIOStreamsDiscard(), Identity: "test"}
	if err := o.Complete(flags, &cobra.Command{}, nil); err != nil {
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
