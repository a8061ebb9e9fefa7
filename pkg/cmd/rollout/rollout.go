// Package rollout implements `kubectl dkc rollout`: start, status, pause,
// resume, abort, history and undo. The work happens in pkg/rollout; these
// commands only parse flags, print, and map errors to exit codes.
package rollout

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/controller"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
	dkcstatus "github.com/kubectl-dkc/dkc/pkg/status"
)

// NewCmdRollout returns the rollout command and its subcommands.
func NewCmdRollout(f genericclioptions.RESTClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Roll a kubelet config out over many nodes: canary, waves, budget, halt, undo",
		Long: `Roll a kubelet config out over many nodes, a few at a time: a canary, then
waves, never more than --max-unavailable nodes down at once, halting on the
first node that reports an error. Each rollout is a NodeConfigRollout in the
config namespace; where the controller runs (deploy/controller.yaml) it
drives them, else start --wait drives one from here. See docs/rollout.md.`,
		Example: `  # Roll a config out over every node, one at a time after a canary
  kubectl dkc rollout start --config my-node-config-5fd8t4bhgb --all --wait

  # Follow it from another terminal
  kubectl dkc rollout status -w

  # Take every node back to its config from before the newest rollout
  kubectl dkc rollout undo --latest`,
	}
	cmd.AddCommand(NewCmdStart(f, streams))
	cmd.AddCommand(NewCmdStatus(f, streams))
	cmd.AddCommand(NewCmdSetState(f, streams, pauseVerb))
	cmd.AddCommand(NewCmdResume(f, streams))
	cmd.AddCommand(NewCmdSetState(f, streams, abortVerb))
	cmd.AddCommand(NewCmdHistory(f, streams))
	cmd.AddCommand(NewCmdUndo(f, streams))
	cmd.AddCommand(NewCmdList(f, streams))
	return cmd
}

// The rollout commands' client-side rate limit. client-go's default, which
// util.Client keeps (5 requests a second, bursts of 10), is made for
// one-off commands; a rollout sends about one request per node it starts,
// a wave at a time. At 5 a second a wave of 100 nodes took 20 s to start,
// which left most of the budget unused while its first nodes had already
// finished (docs/performance.md). 50 a second with bursts of 100 starts
// such a wave at once and still keeps a client from flooding the
// apiserver, which has its own priority and fairness on top.
const (
	clientQPS   = 50
	clientBurst = 100
)

// The rate limit of the reads of kubelets (/flagz, /configz) through the
// apiserver's node proxy that rollout start makes of every node before it
// starts one. What bounds their load on the apiserver is how many are in
// flight (flagz.Parallel), each to another kubelet; the rate limit only
// keeps a runaway loop in check, and is high enough not to pace the reads,
// which come before the first restart (docs/performance.md, "Kubelet
// reads"). They go through a client of their own, so that they leave the
// rollout's own budget of requests alone.
const (
	kubeletReadQPS   = 1000
	kubeletReadBurst = 1000
)

// newKubeletReader returns a clientset for reading kubelets through the
// apiserver's node proxy, with its own rate limit (kubeletReadQPS), unless
// the kubeconfig sets one.
func newKubeletReader(f genericclioptions.RESTClientGetter) (kubernetes.Interface, error) {
	cfg, err := f.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 && cfg.Burst == 0 && cfg.RateLimiter == nil {
		cfg.QPS, cfg.Burst = kubeletReadQPS, kubeletReadBurst
	}
	return util.NewClientset(cfg)
}

// newClients returns a clientset and the rollout store of namespace, with
// the rollout commands' rate limit.
func newClients(f genericclioptions.RESTClientGetter, namespace string) (kubernetes.Interface, *rollout.Store, error) {
	cfg, err := f.ToRESTConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg = withRateLimit(cfg)
	client, err := util.NewClientset(cfg)
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return client, &rollout.Store{Client: dyn, Namespace: namespace}, nil
}

// withRateLimit returns a copy of cfg with clientQPS and clientBurst when
// cfg leaves client-go's defaults; a limit cfg sets is kept.
func withRateLimit(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 && cfg.Burst == 0 && cfg.RateLimiter == nil {
		cfg.QPS, cfg.Burst = clientQPS, clientBurst
	}
	return cfg
}

// nameAndNamespace reads the optional NAME argument and -n of the commands
// that act on one rollout.
func nameAndNamespace(f genericclioptions.RESTClientGetter, cmd *cobra.Command, args []string) (string, string, error) {
	name := ""
	if len(args) == 1 {
		name = args[0]
	}
	ns, err := util.ConfigNamespace(f, cmd)
	return name, ns, err
}

// validateNameOrLatest checks that a command that changes one rollout
// (pause, resume, abort, undo) was told which: NAME, or --latest for the newest,
// which may be someone else's. namespace is the config namespace, where the
// rollouts are.
func validateNameOrLatest(name string, latest bool, namespace string) error {
	switch {
	case name != "" && latest:
		return errors.New("NAME and --latest exclude each other: name the rollout, or pass --latest to act on the newest")
	case name == "" && !latest:
		return fmt.Errorf("name the rollout (kubectl get nodeconfigrollouts -n %s lists them), or pass --latest to act on the newest", namespace)
	}
	return nil
}

// resolve returns the rollout named name, or the newest one when name is
// empty.
func resolve(ctx context.Context, store *rollout.Store, name string) (*rollout.Rollout, error) {
	if name == "" {
		return store.Latest(ctx)
	}
	return store.Get(ctx, name)
}

// drive runs the engine on rollout name until it ends or timeout passes (0:
// no timeout), showing progress on out, and maps the result to the exit
// codes (exitError). With readOnly it only follows the rollout, which
// another client (the controller) drives.
func drive(ctx context.Context, client kubernetes.Interface, store *rollout.Store, name string, timeout time.Duration, streams genericiooptions.IOStreams, readOnly bool) error {
	out := streams.Out
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	p := newProgress(out)
	r, err := rollout.Run(ctx, client, store, name, rollout.Options{
		ReadOnly: readOnly,
		Log:      streams.ErrOut,
		OnChange: func(r *rollout.Rollout, _ map[string]rollout.Observed) { p.update(r) },
	})
	if r != nil {
		p.finish(r)
	}
	return exitError(err, name, timeout, readOnly)
}

// exitError maps how following rollout name ended to the exit codes of
// the table in docs/user-guide.md: nil (0) when it is done, 2 when it
// halted on a node's error, 3 when timeout passed first, and err itself
// (1) otherwise, such as a paused or aborted rollout while it was driven,
// or an aborted one. readOnly is rollout status, which shows the rollout
// but does not drive it.
func exitError(err error, name string, timeout time.Duration, readOnly bool) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rollout.ErrHalted):
		see := "see kubectl dkc rollout status " + name + "; "
		if readOnly {
			see = ""
		}
		return &util.ExitError{Code: dkcstatus.ExitConfigError, Err: fmt.Errorf("%w: %sundo it with kubectl dkc rollout undo %s", err, see, name)}
	case errors.Is(err, context.DeadlineExceeded) && timeout > 0:
		what := "rollout %q is still running, and nothing drives it now: continue it with kubectl dkc rollout resume %s --wait, or install the controller"
		if readOnly {
			what = "rollout %q did not finish: see kubectl dkc rollout status %s"
		}
		return &util.ExitError{Code: dkcstatus.ExitTimeout, Err: fmt.Errorf("%w after %s: "+what, dkcstatus.ErrTimeout, timeout, name, name)}
	}
	return err
}

// leader returns the controller replica that drives the rollouts of
// namespace, or "" when none runs there.
func leader(ctx context.Context, client kubernetes.Interface, namespace string) (string, error) {
	return controller.Leader(ctx, client, namespace, time.Now())
}

// errNoController is start's and undo's error without --wait when no
// controller runs: nothing would drive the rollout.
func errNoController(namespace string) error {
	return fmt.Errorf("no controller runs in namespace %s (lease %s has no current holder), so nothing would drive the rollout: pass --wait to drive it from here, or install the controller (kubectl dkc install, docs/install.md)",
		namespace, controller.LeaseName)
}

// follow drives rollout name here when no controller does (lead is ""),
// and otherwise only follows it, until it ends or timeout passes.
func follow(ctx context.Context, client kubernetes.Interface, store *rollout.Store, lead, name string, timeout time.Duration, streams genericiooptions.IOStreams) error {
	if lead == "" {
		fmt.Fprintf(streams.ErrOut, "No controller runs in namespace %s: rollout/%s is driven from here. If this process stops, continue it with kubectl dkc rollout resume %s --wait.\n",
			store.Namespace, name, name)
		return drive(ctx, client, store, name, timeout, streams, false)
	}
	return drive(ctx, client, store, name, timeout, streams, true)
}
