// Package agent implements `kubectl dkc agent`, the node agent.
package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	dkcagent "github.com/kubectl-dkc/dkc/pkg/agent"
	"github.com/kubectl-dkc/dkc/pkg/checkpoint"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/lifecycle"
	"github.com/kubectl-dkc/dkc/pkg/kubeclient"
	"github.com/kubectl-dkc/dkc/pkg/kubelet"
	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
	"github.com/kubectl-dkc/dkc/pkg/version"
)

// Restart methods, the values of --restart.
const (
	RestartSystemd = "systemd"
	RestartExec    = "exec"
)

// Options holds the flags of `kubectl dkc agent`.
type Options struct {
	NodeName          string
	DynamicConfigDir  string
	KubeletConfig     string
	KubeletConfigDir  string
	KubeletRootDir    string
	ApplyMode         string
	Restart           string
	RestartCommand    string
	StopCommand       string
	StartCommand      string
	SystemdUnit       string
	RestartTimeout    time.Duration
	KubeletURL        string
	KubeletCAFile     string
	KubeletServerName string
	KubeletInsecure   bool
	HealthTimeout     time.Duration
	PodReadyTimeout   time.Duration
	TrialDuration     time.Duration
	// NodeMonitorGracePeriod is kube-controller-manager's
	// --node-monitor-grace-period, which the bounds keep lease and status
	// intervals under.
	NodeMonitorGracePeriod time.Duration
	OnDrift                string
	DriftCheckInterval     time.Duration
	MetricsBindAddress     string
	HealthBindAddress      string
	// APIServerGracePeriod is how long the apiserver may be unreachable
	// before /readyz reports not ready.
	APIServerGracePeriod time.Duration
	// ProbePodTemplate and ProbePodNamespace name the PodTemplate of the
	// health gate's probe pod (dkcagent.ProbePod); no template turns the
	// new-pod check off.
	ProbePodTemplate  string
	ProbePodNamespace string
	// RequireAdmissionPolicy makes the agent apply nothing until the
	// admission policies confine its identity (dkcagent.Confinement).
	RequireAdmissionPolicy bool

	// config is where connect reads the REST config from; Complete sets it.
	config        RESTConfigGetter
	client        kubeclient.Interface
	apiserver     *dkcagent.Reachability
	reviewer      dkcagent.IdentityReviewer
	kubeletClient *http.Client
	genericiooptions.IOStreams
}

// NewAgentOptions returns the defaults: --node-name from $NODE_NAME, replace
// mode, systemd restarts, upstream's 10-minute trial.
func NewAgentOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{
		NodeName:               os.Getenv("NODE_NAME"),
		KubeletRootDir:         "/var/lib/kubelet",
		ApplyMode:              string(kubelet.Replace),
		Restart:                RestartSystemd,
		SystemdUnit:            "kubelet.service",
		RestartTimeout:         2 * time.Minute,
		HealthTimeout:          dkcagent.DefaultHealthTimeout,
		PodReadyTimeout:        dkcagent.DefaultPodReadyTimeout,
		TrialDuration:          dkcagent.DefaultTrialDuration,
		NodeMonitorGracePeriod: kubeletconfig.DefaultNodeMonitorGracePeriod,
		OnDrift:                dkcagent.DriftReport,
		DriftCheckInterval:     dkcagent.DefaultDriftCheckInterval,
		MetricsBindAddress:     "127.0.0.1:10390",
		HealthBindAddress:      "127.0.0.1:10391",
		APIServerGracePeriod:   dkcagent.DefaultAPIServerGracePeriod,
		RequireAdmissionPolicy: true,
		ProbePodNamespace:      probePodNamespace(),
		IOStreams:              streams,
	}
}

// NewCmdAgent returns the agent command.
func NewCmdAgent(f RESTConfigGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewAgentOptions(streams)
	cmd := &cobra.Command{
		Use:   "agent --dynamic-config-dir DIR --kubelet-config PATH",
		Short: "Run the node agent that applies assigned kubelet configs",
		Long: `Run the node agent: it checkpoints the config assigned to its Node, writes
it for the kubelet, restarts the kubelet, gates on its health, rolls back on
failure and reports on the Node. deploy/ runs one per node (docs/agent.md).`,
		Args: cobra.NoArgs,
		RunE: lifecycle.RunE(f, o),
	}
	fl := cmd.Flags()
	fl.StringVar(&o.NodeName, "node-name", o.NodeName, "Name of this node (default $NODE_NAME).")
	fl.StringVar(&o.DynamicConfigDir, "dynamic-config-dir", o.DynamicConfigDir, "Directory of the checkpoint store (DIR/store, in upstream's layout).")
	fl.StringVar(&o.KubeletConfig, "kubelet-config", o.KubeletConfig, "The kubelet's --config file.")
	fl.StringVar(&o.KubeletConfigDir, "kubelet-config-dir", o.KubeletConfigDir, "The kubelet's --config-dir for drop-ins; required with --apply-mode=dropin.")
	fl.StringVar(&o.KubeletRootDir, "kubelet-root-dir", o.KubeletRootDir, "The kubelet's --root-dir, which holds cpu_manager_state and memory_manager_state.")
	fl.StringVar(&o.ApplyMode, "apply-mode", o.ApplyMode, "How a config reaches the kubelet: replace (the whole --config file) or dropin (a *.conf file in --kubelet-config-dir).")
	fl.StringVar(&o.Restart, "restart", o.Restart, "How to restart the kubelet: systemd (over D-Bus) or exec (--restart-command).")
	fl.StringVar(&o.RestartCommand, "restart-command", o.RestartCommand, "Shell command that restarts the kubelet and returns once it runs again; required with --restart=exec.")
	fl.StringVar(&o.StopCommand, "stop-command", o.StopCommand, "Shell command that stops the kubelet, for a CPU or memory manager policy change (--restart=exec).")
	fl.StringVar(&o.StartCommand, "start-command", o.StartCommand, "Shell command that starts the kubelet, for a CPU or memory manager policy change (--restart=exec).")
	fl.StringVar(&o.SystemdUnit, "systemd-unit", o.SystemdUnit, "The kubelet's systemd unit (--restart=systemd).")
	fl.DurationVar(&o.RestartTimeout, "restart-timeout", o.RestartTimeout, "Limit of each restart, stop or start; a timeout is a failure.")
	fl.StringVar(&o.KubeletURL, "kubelet-url", o.KubeletURL, "Base URL of this node's kubelet server, where the health gate reads /healthz and /configz with the agent's credential (default: https://ADDRESS:PORT of the expected config; 127.0.0.1:10250 when unset or unspecified).")
	fl.StringVar(&o.KubeletCAFile, "kubelet-certificate-authority", o.KubeletCAFile, "CA file that verifies the kubelet's serving certificate (default: the CA of the agent's kubeconfig). For a self-signed kubelet certificate: the kubelet's --cert-dir/kubelet.crt.")
	fl.StringVar(&o.KubeletServerName, "kubelet-tls-server-name", o.KubeletServerName, "Name the kubelet's serving certificate must carry (default: the host of --kubelet-url). A self-signed kubelet certificate names the node's hostname.")
	fl.BoolVar(&o.KubeletInsecure, "kubelet-insecure-skip-tls-verify", o.KubeletInsecure, "Do not verify the kubelet's serving certificate. Insecure: the agent's credential goes to whoever answers at the kubelet's address.")
	fl.DurationVar(&o.HealthTimeout, "health-timeout", o.HealthTimeout, "How long a restarted kubelet has to pass the health gate's kubelet checks (healthz, configz, Ready) before the agent rolls back. A kubelet whose healthz and configz pass is kept when only the apiserver does not answer.")
	fl.DurationVar(&o.PodReadyTimeout, "pod-ready-timeout", o.PodReadyTimeout, "How long, once the kubelet's checks passed, the health gate waits for the pods that were Ready before the restart to be Ready again before the agent rolls back. Kubelets up to 1.34 mark every probed pod not Ready at a restart until its readiness probe passes again.")
	fl.DurationVar(&o.TrialDuration, "trial-duration", o.TrialDuration, "How long an applied config must run before it becomes last-known-good.")
	fl.DurationVar(&o.NodeMonitorGracePeriod, "node-monitor-grace-period", o.NodeMonitorGracePeriod, "kube-controller-manager's --node-monitor-grace-period: how long a node may go without a heartbeat before it turns Unknown. A config whose nodeLeaseDurationSeconds or nodeStatusUpdateFrequency, two intervals with jitter, reaches it is refused; the trial judges the node's Lease by it. Set it to the cluster's value when that is not the default.")
	fl.StringVar(&o.OnDrift, "on-drift", o.OnDrift, "What to do when the kubelet's config holds bytes the agent never wrote (kubeadm upgrade, config management): report (condition, Event, history) or reassert (also put the assigned config back through the restart and health gate).")
	fl.DurationVar(&o.DriftCheckInterval, "drift-check-interval", o.DriftCheckInterval, "How often the agent compares the kubelet's config with its record when nothing else makes it sync.")
	fl.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "host:port of the Prometheus /metrics endpoint; \"0\" disables it.")
	fl.StringVar(&o.HealthBindAddress, "health-bind-address", o.HealthBindAddress, "host:port of the agent's /healthz (liveness) and /readyz (readiness) endpoints; \"0\" disables them.")
	fl.DurationVar(&o.APIServerGracePeriod, "apiserver-grace-period", o.APIServerGracePeriod, "How long the agent's requests to the apiserver may keep failing before /readyz reports not ready (503, naming the last error). /healthz stays ok, so that a control-plane outage restarts no agent, and the kubelet is left as it is either way.")
	fl.StringVar(&o.ProbePodTemplate, "probe-pod-template", o.ProbePodTemplate, "PodTemplate of the health gate's probe pod (deploy/probe-pod.yaml): after a restart a pod made from it, bound to this node, must run and turn Ready within --pod-ready-timeout, or the agent rolls back. Judged only when the same pod ran and turned Ready before the restart. \"\" turns the check off.")
	fl.StringVar(&o.ProbePodNamespace, "probe-pod-namespace", o.ProbePodNamespace, "Namespace of --probe-pod-template and of the probe pod (default $POD_NAMESPACE, else kube-system).")
	fl.BoolVar(&o.RequireAdmissionPolicy, "require-admission-policy", o.RequireAdmissionPolicy, "Apply no config until server-side dry-runs show that deploy/admission-policy.yaml confines the agent's credential (no write to another Node, no label on its own); checked at start and every 30s until then, and skipped for a node's own credential (system:node:NAME). false for apiservers without ValidatingAdmissionPolicy (before 1.30).")
	nameTuningFlags(cmd)
	return cmd
}

// tuningFlags are the agent's flags whose defaults fit deploy/ and seldom
// change: endpoints, intervals, limits.
var tuningFlags = []string{
	"kubelet-root-dir", "restart-timeout", "node-monitor-grace-period", "drift-check-interval",
	"metrics-bind-address", "health-bind-address", "apiserver-grace-period", "probe-pod-namespace",
}

// nameTuningFlags hides the tuning flags from cmd's --help, which names
// them in a paragraph of its Long text instead of a line each, so that it
// fits on a screen. They work as any other flag, and docs/reference.md
// lists them with the rest.
func nameTuningFlags(cmd *cobra.Command) {
	const width = 79
	lines := []string{"Tuning flags, whose defaults fit deploy/ (docs/reference.md describes them):"}
	line := ""
	for i, name := range tuningFlags {
		cmd.Flags().Lookup(name).Hidden = true
		word := "--" + name + ","
		if i == len(tuningFlags)-1 {
			word = "--" + name + "."
		}
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) > width:
			lines, line = append(lines, line), word
		default:
			line += " " + word
		}
	}
	cmd.Long += "\n\n" + strings.Join(append(lines, line), "\n")
}

// Validate checks the flags.
func (o *Options) Validate() error {
	switch {
	case o.NodeName == "":
		return errors.New("--node-name is required: pass it or set NODE_NAME")
	case o.DynamicConfigDir == "":
		return errors.New("--dynamic-config-dir is required: the directory of the agent's checkpoint store")
	case o.KubeletConfig == "":
		return errors.New("--kubelet-config is required: the kubelet's --config file")
	}
	switch kubelet.ApplyMode(o.ApplyMode) {
	case kubelet.Replace:
	case kubelet.DropIn:
		if o.KubeletConfigDir == "" {
			return errors.New("--apply-mode=dropin needs --kubelet-config-dir: the kubelet's --config-dir")
		}
	default:
		return fmt.Errorf("--apply-mode must be replace or dropin, got %q", o.ApplyMode)
	}
	switch o.Restart {
	case RestartExec:
		if o.RestartCommand == "" {
			return errors.New("--restart=exec needs --restart-command: a command that restarts the kubelet")
		}
		if (o.StopCommand == "") != (o.StartCommand == "") {
			return errors.New("--stop-command and --start-command go together: pass both or neither")
		}
	case RestartSystemd:
		if o.SystemdUnit == "" {
			return errors.New("--systemd-unit must not be empty with --restart=systemd")
		}
	default:
		return fmt.Errorf("--restart must be systemd or exec, got %q", o.Restart)
	}
	if o.KubeletURL != "" {
		if u, err := url.Parse(o.KubeletURL); err != nil || u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("--kubelet-url must be an https URL such as https://127.0.0.1:10250, got %q", o.KubeletURL)
		}
	}
	if o.KubeletInsecure && o.KubeletCAFile != "" {
		return errors.New("--kubelet-insecure-skip-tls-verify and --kubelet-certificate-authority exclude each other: pass one")
	}
	switch {
	case o.RestartTimeout <= 0:
		return fmt.Errorf("--restart-timeout must be positive, got %s", o.RestartTimeout)
	case o.HealthTimeout <= 0:
		return fmt.Errorf("--health-timeout must be positive, got %s", o.HealthTimeout)
	case o.PodReadyTimeout <= 0:
		return fmt.Errorf("--pod-ready-timeout must be positive, got %s", o.PodReadyTimeout)
	case o.TrialDuration < 0:
		return fmt.Errorf("--trial-duration must not be negative, got %s", o.TrialDuration)
	case o.NodeMonitorGracePeriod <= 0:
		return fmt.Errorf("--node-monitor-grace-period must be positive, got %s: kube-controller-manager's value (default %s)", o.NodeMonitorGracePeriod, kubeletconfig.DefaultNodeMonitorGracePeriod)
	case o.DriftCheckInterval < 0:
		return fmt.Errorf("--drift-check-interval must be positive, got %s", o.DriftCheckInterval)
	case o.APIServerGracePeriod <= 0:
		return fmt.Errorf("--apiserver-grace-period must be positive, got %s", o.APIServerGracePeriod)
	}
	if o.ProbePodTemplate != "" && o.ProbePodNamespace == "" {
		return errors.New("--probe-pod-template needs --probe-pod-namespace: the namespace of the template and the probe pod")
	}
	if o.OnDrift != "" && o.OnDrift != dkcagent.DriftReport && o.OnDrift != dkcagent.DriftReassert {
		return fmt.Errorf("--on-drift must be %s or %s, got %q", dkcagent.DriftReport, dkcagent.DriftReassert, o.OnDrift)
	}
	for _, a := range []struct{ flag, value string }{{"--metrics-bind-address", o.MetricsBindAddress}, {"--health-bind-address", o.HealthBindAddress}} {
		if a.value == "0" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.value); err != nil {
			return fmt.Errorf("%s must be host:port (or \"0\" to disable), got %q", a.flag, a.value)
		}
	}
	return nil
}

// Complete keeps f, kubectl's global flags, for connect: the clients
// depend on flags that Validate checks first (--apiserver-grace-period,
// the kubelet's TLS flags), so that a bad flag is reported as such, even
// where no kubeconfig can be loaded.
func (o *Options) Complete(f RESTConfigGetter, _ *cobra.Command, _ []string) error {
	o.config = f
	return nil
}

// connect builds the clients from kubectl's global flags. Every request
// of the apiserver clients tells o.apiserver whether it got through.
func (o *Options) connect() error {
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.UserAgent = "kubectl-dkc-agent/" + version.Get().Version
	o.apiserver = dkcagent.NewReachability(o.APIServerGracePeriod, clock.RealClock{},
		klog.Background().WithName("agent").WithValues("node", o.NodeName))
	apiCfg := rest.CopyConfig(cfg)
	apiCfg.Wrap(o.apiserver.Wrap)
	o.client, err = kubeclient.NewForConfig(apiCfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	if o.RequireAdmissionPolicy {
		if o.reviewer, err = dkcagent.NewSelfSubjectReviewer(apiCfg); err != nil {
			return err
		}
	}
	// The kubelet's client: its requests say nothing of the apiserver.
	o.kubeletClient, err = kubelet.NewKubeletClient(cfg, kubelet.KubeletTLS{
		CAFile:     o.KubeletCAFile,
		ServerName: o.KubeletServerName,
		Insecure:   o.KubeletInsecure,
	})
	return err
}

// Run connects, then runs the agent until SIGINT or SIGTERM.
func (o *Options) Run(ctx context.Context) error {
	if err := o.connect(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := klog.Background().WithName("agent")
	ctx = klog.NewContext(ctx, logger)

	// One agent per store: a second one would race the first on the store
	// and on the kubelet. Held until the process ends.
	lock, err := checkpoint.AcquireLock(o.DynamicConfigDir)
	if err != nil {
		return err
	}
	defer lock.Release()

	store, err := checkpoint.Open(o.DynamicConfigDir, clock.RealClock{})
	if err != nil {
		return fmt.Errorf("open checkpoint store: %w", err)
	}
	a := &dkcagent.Agent{
		Client:                 o.client,
		NodeName:               o.NodeName,
		Store:                  store,
		Clock:                  clock.RealClock{},
		Metrics:                dkcagent.NewMetrics(),
		KubeletRootDir:         o.KubeletRootDir,
		HealthTimeout:          o.HealthTimeout,
		PodReadyTimeout:        o.PodReadyTimeout,
		TrialDuration:          o.TrialDuration,
		NodeMonitorGracePeriod: o.NodeMonitorGracePeriod,
		OnDrift:                o.OnDrift,
		DriftCheckInterval:     o.DriftCheckInterval,
		Prober: kubelet.NewProber(kubelet.ProberConfig{
			Client:        o.client,
			NodeName:      o.NodeName,
			KubeletURL:    o.KubeletURL,
			KubeletClient: o.kubeletClient,
		}),
	}
	if o.RequireAdmissionPolicy {
		a.Confinement = &dkcagent.Confinement{Reviewer: o.reviewer}
	}
	if o.ProbePodTemplate != "" {
		a.ProbePod = &dkcagent.ProbePod{Namespace: o.ProbePodNamespace, Template: o.ProbePodTemplate}
	}
	switch kubelet.ApplyMode(o.ApplyMode) {
	case kubelet.DropIn:
		a.Writer = kubelet.NewDropInWriter(o.KubeletConfig, o.KubeletConfigDir)
	default:
		w := kubelet.NewReplaceWriter(o.KubeletConfig, store)
		w.ConfigDir = o.KubeletConfigDir
		a.Writer = w
	}
	// READY=1 once the kubelet's config is in place: after start-up, or
	// as start-up's own kubelet job is queued (see readiness).
	ready := newReadiness(logger)
	a.Started = ready.ready
	switch o.Restart {
	case RestartExec:
		r := kubelet.NewExecRestarter(shell(o.RestartCommand), o.RestartTimeout)
		r.StopCommand, r.StartCommand = shell(o.StopCommand), shell(o.StartCommand)
		a.Restarter = readyFirst{Restarter: r, ready: ready.ready}
	default:
		r := kubelet.NewSystemdRestarter(o.SystemdUnit, o.RestartTimeout)
		r.Queued = ready.ready
		a.Restarter = r
	}

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(kubeclient.EventSink{Client: o.client})
	defer broadcaster.Shutdown()
	a.Recorder = broadcaster.NewRecorder(kubeclient.Scheme, corev1.EventSource{Component: "kubectl-dkc-agent", Host: o.NodeName})

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(a.Metrics.Registry, promhttp.HandlerOpts{}))
	if err := o.serve(ctx, "metrics", o.MetricsBindAddress, mux); err != nil {
		return err
	}
	health := http.NewServeMux()
	// Liveness: ok while the agent runs, whatever the apiserver does, so
	// that a control-plane outage restarts no agent across the fleet.
	health.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	})
	// Readiness: not ready once the apiserver has been unreachable for
	// --apiserver-grace-period.
	health.Handle("/readyz", o.apiserver)
	if err := o.serve(ctx, "health", o.HealthBindAddress, health); err != nil {
		return err
	}

	logger.Info("Starting", "node", o.NodeName, "version", version.Get().Version, "applyMode", o.ApplyMode,
		"restart", o.Restart, "store", store.Dir(), "healthTimeout", o.HealthTimeout, "podReadyTimeout", o.PodReadyTimeout, "trialDuration", o.TrialDuration,
		"apiserverGracePeriod", o.APIServerGracePeriod, "nodeMonitorGracePeriod", o.NodeMonitorGracePeriod)
	ready.status("Putting the checkpointed kubelet config in place")
	return a.Run(ctx)
}

// serve serves handler on addr ("0": not at all) until ctx ends.
func (o *Options) serve(ctx context.Context, what, addr string, handler http.Handler) error {
	if addr == "0" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s for %s: %w", addr, what, err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "Server failed", "server", what, "address", addr)
		}
	}()
	klog.FromContext(ctx).Info("Serving", "server", what, "address", ln.Addr().String())
	return nil
}

// probePodNamespace is --probe-pod-namespace's default: $POD_NAMESPACE
// (deploy/daemonset.yaml sets it from the pod's own namespace), else
// kube-system.
func probePodNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "kube-system"
}

// shell runs command with /bin/sh -c; "" is no command.
func shell(command string) []string {
	if command == "" {
		return nil
	}
	return []string{"/bin/sh", "-c", command}
}
