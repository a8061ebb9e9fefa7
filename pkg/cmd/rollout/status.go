package rollout

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/lifecycle"
	"github.com/kubectl-dkc/dkc/pkg/pool"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/source"
	dkcstatus "github.com/kubectl-dkc/dkc/pkg/status"
)

// StatusOptions holds the flags of `kubectl dkc rollout status`.
type StatusOptions struct {
	Name      string
	Namespace string
	Watch     bool
	Timeout   time.Duration
	// TimeoutSet is whether --timeout was given.
	TimeoutSet bool

	PrintFlags *genericclioptions.PrintFlags
	Printer    printers.ResourcePrinter
	Client     kubernetes.Interface
	Store      *rollout.Store
	genericiooptions.IOStreams
}

// NewStatusOptions returns StatusOptions with the defaults.
func NewStatusOptions(streams genericiooptions.IOStreams) *StatusOptions {
	pf := genericclioptions.NewPrintFlags("")
	pf.NamePrintFlags = nil
	return &StatusOptions{Namespace: source.DefaultNamespace, PrintFlags: pf, IOStreams: streams}
}

// NewCmdStatus returns the rollout status command.
func NewCmdStatus(f genericclioptions.RESTClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewStatusOptions(streams)
	cmd := &cobra.Command{
		Use:   "status [NAME | ncp/POOL]",
		Short: "Show a rollout's waves: done, in progress, waiting, failed; or a pool's state",
		Long: `Show a rollout's waves: how many nodes of each are done, in progress,
waiting or failed, read live from the nodes. Without NAME, the newest
rollout; with ncp/POOL, a NodeConfigPool's state, revision and counts. -w
follows it until it ends or --timeout passes. It exits 2 when the rollout
halted on a node's error, 1 when it was aborted. Details and exit codes:
docs/rollout.md, "Watch".`,
		Example: `  # The newest rollout
  kubectl dkc rollout status

  # Follow one until it ends
  kubectl dkc rollout status my-node-config-5fd8t4bhgb-x7k2q -w

  # The halt reason, for a script
  kubectl dkc rollout status -o jsonpath='{.status.reason}'

  # A pool, until it is Ready
  kubectl dkc rollout status ncp/workers -w --timeout 30m`,
		Args: cobra.MaximumNArgs(1),
		RunE: lifecycle.RunE(f, o),
	}
	o.PrintFlags.AddFlags(cmd)
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", false, "Follow the rollout until it is done, halted or aborted.")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 0, "How long -w follows; 0 means forever.")
	return cmd
}

// Complete fills in the name, namespace, client and printer.
func (o *StatusOptions) Complete(f genericclioptions.RESTClientGetter, cmd *cobra.Command, args []string) error {
	var err error
	if o.Name, o.Namespace, err = nameAndNamespace(f, cmd, args); err != nil {
		return err
	}
	o.TimeoutSet = cmd.Flags().Changed("timeout")
	if *o.PrintFlags.OutputFormat != "" {
		if o.Printer, err = util.Printer(o.PrintFlags); err != nil {
			return err
		}
	}
	o.Client, o.Store, err = newClients(f, o.Namespace)
	return err
}

// Validate checks the flags.
func (o *StatusOptions) Validate() error {
	if o.Timeout < 0 {
		return fmt.Errorf("invalid --timeout %s: must not be negative (0 means forever)", o.Timeout)
	}
	if (o.TimeoutSet || o.Timeout > 0) && !o.Watch {
		return errors.New("--timeout has no effect without -w/--watch: add -w, or drop --timeout")
	}
	if o.Watch && o.Printer != nil {
		return errors.New("-w/--watch prints the table or event lines: it cannot be used with -o")
	}
	return nil
}

// Run prints the rollout with its nodes' live phases, or follows it; for a
// pool (ncp/NAME), the pool's state and its current rollout.
func (o *StatusOptions) Run(ctx context.Context) error {
	if name, ok := poolArg(o.Name); ok {
		return o.runPool(ctx, name)
	}
	r, err := resolve(ctx, o.Store, o.Name)
	if err != nil {
		return err
	}
	if o.Watch {
		return drive(ctx, o.Client, o.Store, r.Name, o.Timeout, o.IOStreams, true)
	}
	live, err := rollout.LiveStatus(ctx, o.Client, r)
	if err != nil {
		return err
	}
	if o.Printer != nil {
		err = o.Printer.PrintObj(live, o.Out)
	} else {
		err = rollout.PrintTable(o.Out, live)
	}
	if err != nil {
		return err
	}
	// A paused rollout is no error here: it waits for resume.
	if err := rollout.StateError(live); !errors.Is(err, rollout.ErrPaused) {
		return exitError(err, live.Name, 0, true)
	}
	return nil
}

// runPool is Run for pool name.
func (o *StatusOptions) runPool(ctx context.Context, name string) error {
	pools := poolStore(o.Store)
	if o.Watch {
		return followPool(ctx, o.Out, pools, name, o.Timeout)
	}
	p, err := pools.Get(ctx, name)
	if err != nil {
		return err
	}
	if o.Printer != nil {
		err = o.Printer.PrintObj(p, o.Out)
	} else {
		err = printPoolStatus(ctx, o.Out, o.Client, o.Store, p)
	}
	if err != nil {
		return err
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, pool.Stalled); c != nil && c.Status == metav1.ConditionTrue && p.Status.ObservedGeneration == p.Generation {
		return &util.ExitError{Code: dkcstatus.ExitConfigError, Err: fmt.Errorf("nodeconfigpool %q is stalled (%s): %s", name, c.Reason, c.Message)}
	}
	return nil
}
