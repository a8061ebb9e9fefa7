// Package controller implements `kubectl dkc controller`: the in-cluster
// host of the rollout engine (pkg/controller).
package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/lifecycle"
	"github.com/kubectl-dkc/dkc/pkg/controller"
	"github.com/kubectl-dkc/dkc/pkg/lease"
	"github.com/kubectl-dkc/dkc/pkg/pool"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
)

// Options are the controller's flags.
type Options struct {
	Namespace         string
	Identity          string
	LeaseDuration     time.Duration
	RenewDeadline     time.Duration
	RetryPeriod       time.Duration
	HealthBindAddress string
	// QPS and Burst limit the controller's requests to the apiserver.
	QPS   float32
	Burst int
	// Alertmanagers is --alertmanager-url: the only Alertmanagers the
	// controller asks for a rollout's spec.pauseOnAlerts.
	Alertmanagers []string

	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Metadata watches the metadata of the namespace's ConfigMaps, which
	// pools name.
	Metadata metadata.Interface
	// Lease is the leader election's client: Kube's config with a rate
	// limiter of its own, so that a renewal never queues behind a
	// rollout's burst of requests on Kube's limiter and the leader keeps
	// its lease however busy it is (kube-controller-manager also elects
	// its leader with a client of its own).
	Lease kubernetes.Interface
	genericiooptions.IOStreams
}

// NewCmdController returns the controller command.
func NewCmdController(f genericclioptions.RESTClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := &Options{
		LeaseDuration:     15 * time.Second,
		RenewDeadline:     10 * time.Second,
		RetryPeriod:       2 * time.Second,
		HealthBindAddress: ":8081",
		// A rollout sends about one request per node it starts: the CLI's
		// rollout limit (pkg/cmd/rollout).
		QPS:       50,
		Burst:     100,
		IOStreams: streams,
	}
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Drive rollouts in the cluster (run by deploy/'s Deployment)",
		Long: `Drive the NodeConfigRollouts of the config namespace (-n, default
kube-system) from inside the cluster, so that no operator's process has to
stay alive while a rollout runs, and reconcile its NodeConfigPools: each
change of a pool's config becomes a rollout of the pool's nodes, and a node
that joins a pool later gets its config under the pool's strategy.

Its replicas elect one leader through the Lease ` + controller.LeaseName + `
in the config namespace; the others stand by and take over within
--leader-elect-lease-duration of the leader's last renewal. The leader runs
the same engine as kubectl dkc rollout start --wait: it records each node's
phase before it assigns it, so a takeover starts no node twice and keeps the
budget. kubectl dkc rollout start, pause, resume, abort and undo only change
the rollout objects when a controller leads.

It serves /healthz (this process is alive) and /metrics (the leader's
dkc_controller_rollouts{state}) on --health-bind-address. It
exits with status 1 when it loses the lease, to start again as a standby.
deploy/controller.yaml runs it; docs/rollout.md describes it.`,
		Example: `  # Run the controller against the current kubeconfig's cluster
  kubectl dkc controller --identity "$(hostname)"`,
		Args: cobra.NoArgs,
		RunE: lifecycle.RunE(f, o),
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Identity, "identity", "", "This replica's name in the lease (default: $POD_NAME, else the host name and a random suffix).")
	fl.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "How long a standby waits after the leader's last renewal before it takes over.")
	fl.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "How long the leader tries to renew the lease before it stops leading; less than the lease duration.")
	fl.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "How often the replicas try to acquire or renew the lease.")
	fl.StringVar(&o.HealthBindAddress, "health-bind-address", o.HealthBindAddress, "host:port of /healthz and /metrics; \"0\" disables them.")
	fl.Float32Var(&o.QPS, "kube-api-qps", o.QPS, "Requests per second to the apiserver, beyond --kube-api-burst. A rollout starts its nodes at about this rate: raise it for budgets of hundreds of nodes. The leader election has a limiter of its own.")
	fl.IntVar(&o.Burst, "kube-api-burst", o.Burst, "Requests to the apiserver at once before --kube-api-qps applies.")
	fl.StringArrayVar(&o.Alertmanagers, "alertmanager-url", o.Alertmanagers, "An Alertmanager the controller may ask for the alerts that hold a rollout (spec.pauseOnAlerts), repeatable. It asks no other: a rollout or pool that names another starts no node (AlertmanagerNotAllowed). None: rollouts that pause on alerts start no node.")
	return cmd
}

// Complete fills in the namespace, identity and clients.
func (o *Options) Complete(f genericclioptions.RESTClientGetter, cmd *cobra.Command, _ []string) error {
	var err error
	if o.Namespace, err = util.ConfigNamespace(f, cmd); err != nil {
		return err
	}
	if o.Identity == "" {
		o.Identity = os.Getenv("POD_NAME")
	}
	if o.Identity == "" {
		host, _ := os.Hostname()
		o.Identity = host + "_" + rand.String(5)
	}
	cfg, err := f.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = o.QPS, o.Burst
	cfg.UserAgent = "kubectl-dkc-controller"
	if o.Kube, err = util.NewClientset(cfg); err != nil {
		return err
	}
	if o.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	if o.Metadata, err = metadata.NewForConfig(cfg); err != nil {
		return err
	}
	// NewForConfig gives each client a rate limiter of its own.
	lease := rest.CopyConfig(cfg)
	lease.UserAgent = "kubectl-dkc-controller/leader-election"
	o.Lease, err = util.NewClientset(lease)
	return err
}

// Validate checks the lease timings and the rate limit.
func (o *Options) Validate() error {
	if o.QPS <= 0 || o.Burst < 1 {
		return fmt.Errorf("invalid rate limit: want --kube-api-qps (%g) > 0 and --kube-api-burst (%d) >= 1", o.QPS, o.Burst)
	}
	for _, u := range o.Alertmanagers {
		if err := rollout.ValidateAlertmanagerURL(u); err != nil {
			return fmt.Errorf("invalid --alertmanager-url: %w", err)
		}
	}
	if o.RetryPeriod <= 0 || o.RenewDeadline <= o.RetryPeriod || o.LeaseDuration <= o.RenewDeadline {
		return fmt.Errorf("invalid leader election timings: want 0 < --leader-elect-retry-period (%s) < --leader-elect-renew-deadline (%s) < --leader-elect-lease-duration (%s)",
			o.RetryPeriod, o.RenewDeadline, o.LeaseDuration)
	}
	return nil
}

// Run serves /healthz and drives rollouts while this replica leads.
func (o *Options) Run(ctx context.Context) error {
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	logger := klog.Background().WithName("controller").WithValues("identity", o.Identity)
	ctx = klog.NewContext(ctx, logger)
	c := &controller.Controller{
		Kube:     o.Kube,
		Store:    &rollout.Store{Client: o.Dynamic, Namespace: o.Namespace},
		Pools:    &pool.Store{Client: o.Dynamic, Namespace: o.Namespace},
		Metadata: o.Metadata,
		Log:      o.ErrOut,
		// Each rollout's Lease names this replica and keeps the timings of
		// the controller's.
		Options: rollout.Options{Identity: o.Identity,
			LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RetryPeriod: o.RetryPeriod,
			// The controller asks only the Alertmanagers it was given: a
			// rollout's author does not choose what it fetches.
			RestrictAlertmanagers: true, Alertmanagers: o.Alertmanagers},
	}
	if o.HealthBindAddress != "0" {
		ln, err := net.Listen("tcp", o.HealthBindAddress)
		if err != nil {
			return fmt.Errorf("serve /healthz and /metrics: %w", err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
		reg := prometheus.NewRegistry()
		reg.MustRegister(c.Collector(), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
	}
	e := &lease.Election{
		Client: o.Lease, Namespace: o.Namespace, Name: controller.LeaseName, Identity: o.Identity,
		LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RetryPeriod: o.RetryPeriod,
	}
	// A controller that stopped while it leads must not keep the lease:
	// stop leading, and exit.
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	err := e.Run(ctx, func(ctx context.Context) {
		if err := c.Run(ctx); err != nil && ctx.Err() == nil {
			stop(fmt.Errorf("controller stopped: %w", err))
		}
	})
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
