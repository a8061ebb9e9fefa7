// Package install implements `kubectl dkc install`: put dkc into a
// cluster from the manifests of deploy/ embedded in the binary. The work
// happens in pkg/install.
package install

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/lifecycle"
	"github.com/kubectl-dkc/dkc/pkg/install"
	"github.com/kubectl-dkc/dkc/pkg/source"
	dkcstatus "github.com/kubectl-dkc/dkc/pkg/status"
	"github.com/kubectl-dkc/dkc/pkg/version"
)

// DefaultTimeout bounds the wait for the controller and the agents.
const DefaultTimeout = 5 * time.Minute

// pollInterval is how often the wait looks at the cluster.
const pollInterval = time.Second

// Options holds the flags of `kubectl dkc install`.
type Options struct {
	ImageRepository string
	Version         string
	Agent           string
	DryRun          string
	ForceConflicts  bool
	Wait            bool
	Timeout         time.Duration
	// WaitSet and TimeoutSet are whether --wait and --timeout were given.
	WaitSet, TimeoutSet bool
	// Namespace is -n, when given: install refuses any but kube-system.
	Namespace string

	PrintFlags *genericclioptions.PrintFlags

	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	Mapper  meta.RESTMapper
	genericiooptions.IOStreams
}

// NewInstallOptions returns Options with the defaults.
func NewInstallOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{
		Agent:      install.AgentDaemonSet,
		DryRun:     util.DryRunNone,
		Wait:       true,
		Timeout:    DefaultTimeout,
		PrintFlags: util.NewPrintFlags(),
		IOStreams:  streams,
	}
}

// NewCmdInstall returns the install command.
func NewCmdInstall(f genericclioptions.RESTClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewInstallOptions(streams)
	cmd := &cobra.Command{
		Use:   "install --image-repository HOST/PATH",
		Short: "Install the agent, the controller and the API of dkc in the cluster",
		Long: `Install the agent, the controller and the API of dkc in the cluster: the
manifests of deploy/, which the binary holds, applied server-side as field
manager kubectl-dkc (the CRDs first, once served, then the rest, in
kube-system), with the images of --image-repository tagged --version (this
kubectl dkc's version by default). It then waits for the controller's leader
and a Ready agent on every node. Running it again changes nothing; another
--version upgrades. --agent=systemd applies the cluster side only, for agents
run as a systemd unit; --dry-run=client -o yaml prints every object.
Exit codes: 0 installed and ready, 1 an error, 3 --timeout passed first.
Details: docs/install.md.`,
		Example: `  # Install with the images pushed by make image push IMAGE_REPO=registry.mycorp.example/dkc
  kubectl dkc install --image-repository registry.mycorp.example/dkc

  # Print what install would apply, for a GitOps repository
  kubectl dkc install --image-repository registry.mycorp.example/dkc --dry-run=client -o yaml

  # Cluster side only, for agents installed as a systemd unit
  kubectl dkc install --image-repository registry.mycorp.example/dkc --agent=systemd`,
		Args: cobra.NoArgs,
		RunE: lifecycle.RunE(f, o),
	}
	cmd.Flags().StringVar(&o.ImageRepository, "image-repository", o.ImageRepository, "Registry and path of dkc's images (HOST/PATH, as make push's IMAGE_REPO): HOST/PATH/kubectl-dkc-agent:VERSION, HOST/PATH/kubectl-dkc-controller:VERSION and HOST/PATH/kubectl-dkc-probe:v1.")
	cmd.Flags().StringVar(&o.Version, "version", o.Version, "Tag of the agent's and the controller's images (default: this kubectl dkc's version, as kubectl dkc version prints it).")
	cmd.Flags().StringVar(&o.Agent, "agent", o.Agent, `How the agent runs: "daemonset" (a pod per node) or "systemd" (a unit on each node, installed by hand; only its cluster side is applied).`)
	_ = cmd.RegisterFlagCompletionFunc("agent", cobra.FixedCompletions(install.Agents, cobra.ShellCompDirectiveNoFileComp))
	util.AddDryRunFlag(cmd, &o.DryRun, `Must be "none", "client", or "server". With client, print the objects without a cluster; with server, send every apply as a server-side dry run.`)
	cmd.Flags().BoolVar(&o.ForceConflicts, "force-conflicts", o.ForceConflicts, "Take over fields that another field manager owns, as kubectl apply --server-side --force-conflicts.")
	cmd.Flags().BoolVar(&o.Wait, "wait", o.Wait, "Wait until the controller has a leader and every node a Ready agent.")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "How long --wait waits; 0 means forever.")
	o.PrintFlags.AddFlags(cmd)
	return cmd
}

// Complete fills in the clients, unless a client dry run needs none.
func (o *Options) Complete(f genericclioptions.RESTClientGetter, cmd *cobra.Command, _ []string) error {
	if !cmd.Flags().Changed("version") {
		o.Version = version.Get().Version
	}
	o.WaitSet = cmd.Flags().Changed("wait")
	o.TimeoutSet = cmd.Flags().Changed("timeout")
	if flag := cmd.Flag("namespace"); flag != nil && flag.Changed {
		o.Namespace = flag.Value.String()
	}
	if o.DryRun == util.DryRunClient {
		return nil
	}
	var err error
	o.Client, o.Dynamic, o.Mapper, err = util.ObjectClients(f)
	return err
}

// Validate checks the flags.
func (o *Options) Validate() error {
	if o.ImageRepository == "" {
		return errors.New("--image-repository is required: no registry publishes dkc's images yet; push them with make image push IMAGE_REPO=HOST/PATH and name HOST/PATH here")
	}
	if strings.Contains(o.ImageRepository, "://") {
		return fmt.Errorf("invalid --image-repository %q: name HOST/PATH, without a scheme", o.ImageRepository)
	}
	if o.Version == "" {
		return errors.New("--version is empty: name the tag of the agent's and the controller's images")
	}
	if !slices.Contains(install.Agents, o.Agent) {
		return fmt.Errorf(`invalid --agent %q: must be "%s"`, o.Agent, strings.Join(install.Agents, `" or "`))
	}
	if o.Namespace != "" && o.Namespace != source.DefaultNamespace {
		return fmt.Errorf("install puts dkc in %s, not in -n %s: drop -n, or render with --dry-run=client -o yaml and change the namespace yourself", source.DefaultNamespace, o.Namespace)
	}
	if err := util.ValidateDryRun(o.DryRun); err != nil {
		return err
	}
	if o.WaitSet && o.Wait && o.DryRun != util.DryRunNone {
		return errors.New("--wait cannot be used with --dry-run: nothing would change to wait for")
	}
	if o.Timeout < 0 {
		return fmt.Errorf("invalid --timeout %s: must not be negative (0 means forever)", o.Timeout)
	}
	if o.TimeoutSet && (!o.Wait || o.DryRun != util.DryRunNone) {
		return util.ErrTimeoutWithoutWait
	}
	if _, err := util.Printer(o.PrintFlags); err != nil {
		return err
	}
	return nil
}

func (o *Options) render() install.Options {
	return install.Options{ImageRepository: o.ImageRepository, Version: o.Version, Agent: o.Agent}
}

// reporter returns what prints each object as it is applied, with what
// was done to it. The default output and -o name name the outcome: a
// printer of cli-runtime's PrintFlags reads the flags' operation when it
// prints, so each object gets a printer made for its own outcome. The other
// formats keep one printer, so that -o yaml separates the objects with ---.
func (o *Options) reporter() func(obj *unstructured.Unstructured, outcome string) error {
	var kept printers.ResourcePrinter
	return func(obj *unstructured.Unstructured, outcome string) error {
		if f := *o.PrintFlags.OutputFormat; f != "" && f != "name" && kept != nil {
			return kept.PrintObj(obj, o.Out)
		}
		p, err := util.ToPrinter(o.PrintFlags, o.DryRun, outcome)
		if err != nil {
			return err
		}
		if f := *o.PrintFlags.OutputFormat; f != "" && f != "name" {
			kept = p
		}
		return p.PrintObj(obj, o.Out)
	}
}

// Run applies the rendering and waits for the controller and the agents.
func (o *Options) Run(ctx context.Context) error {
	objs, err := install.Render(o.render())
	if err != nil {
		return err
	}
	report := o.reporter()
	if o.DryRun == util.DryRunClient {
		for _, obj := range objs {
			if err := report(obj, install.Applied); err != nil {
				return err
			}
		}
		return nil
	}
	w, err := install.FindWorkloads(objs)
	if err != nil {
		return err
	}
	a := &install.Applier{Dynamic: o.Dynamic, Mapper: o.Mapper, Force: o.ForceConflicts, DryRun: o.DryRun == util.DryRunServer}
	if err := a.ApplyAll(ctx, objs, report); err != nil {
		return err
	}
	if o.DryRun != util.DryRunNone || !o.Wait {
		return o.next()
	}
	r, err := o.wait(ctx, w)
	if err != nil {
		return err
	}
	out := o.Out
	if *o.PrintFlags.OutputFormat != "" {
		out = o.ErrOut
	}
	fmt.Fprintf(out, "kubectl dkc %s installed: %s\n", o.Version, r)
	return o.next()
}

// next says what is left to do by hand: the agents of --agent=systemd.
func (o *Options) next() error {
	if o.Agent == install.AgentSystemd {
		fmt.Fprintf(o.ErrOut, "The agent runs as a systemd unit: install kubectl-dkc-agent %s and its unit on each node, as docs/install.md (\"The systemd unit\") says.\n", o.Version)
	}
	return nil
}

// wait polls until the controller leads and every node runs a Ready
// agent, redrawing a line of progress on a terminal, and returns the last
// state seen. A timeout exits 3.
func (o *Options) wait(ctx context.Context, w install.Workloads) (install.Readiness, error) {
	tty := util.IsTerminal(o.ErrOut)
	var last install.Readiness
	var lastErr error
	cond := func(ctx context.Context) (bool, error) {
		last, lastErr = install.Observe(ctx, o.Client, w, time.Now())
		if tty {
			line := last.String()
			if lastErr != nil {
				line = lastErr.Error()
			}
			fmt.Fprintf(o.ErrOut, "\r\x1b[KWaiting: %s", line)
		}
		return lastErr == nil && last.Done(), nil
	}
	var err error
	if o.Timeout == 0 {
		err = wait.PollUntilContextCancel(ctx, pollInterval, true, cond)
	} else {
		err = wait.PollUntilContextTimeout(ctx, pollInterval, o.Timeout, true, cond)
	}
	if tty {
		fmt.Fprint(o.ErrOut, "\r\x1b[K")
	}
	if err == nil {
		return last, nil
	}
	state := last.String()
	if lastErr != nil {
		state = lastErr.Error()
	}
	if ctx.Err() == nil && wait.Interrupted(err) {
		return last, &util.ExitError{Code: dkcstatus.ExitTimeout, Err: fmt.Errorf("install: %w after %s: %s", dkcstatus.ErrTimeout, o.Timeout, state)}
	}
	return last, fmt.Errorf("install: %w: %s", err, state)
}
