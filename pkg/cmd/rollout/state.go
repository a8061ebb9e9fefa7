package rollout

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/lifecycle"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// verb is a state change a subcommand makes.
type verb struct {
	use, short, long, example string
	// operation is what the printer says: "paused".
	operation string
	to        rollout.State
	from      []rollout.State
}

var (
	pauseVerb = verb{
		use:   "pause (NAME | --latest)",
		short: "Pause a rollout: no further node is started until resume",
		long: `Pause a rollout: no further node is started until kubectl dkc rollout
resume. Nodes already started finish their apply. --latest pauses the
newest rollout instead of NAME. A client driving the rollout stops.`,
		example: `  # Pause a rollout
  kubectl dkc rollout pause my-node-config-5fd8t4bhgb-x7k2q

  # Pause the newest rollout
  kubectl dkc rollout pause --latest`,
		operation: "paused", to: rollout.Paused, from: []rollout.State{rollout.Running},
	}
	abortVerb = verb{
		use:   "abort (NAME | --latest)",
		short: "Abort a rollout: nodes keep what they run now",
		long: `Abort a rollout for good: no further node is started, and it cannot be
resumed. Nodes keep what they run now; nodes in progress finish their
apply. Nodes the rollout cordoned to drain them stay cordoned: uncordon them
with kubectl uncordon, once they run their config. To take the nodes back
to what they ran before, use kubectl dkc rollout undo instead (it aborts the
rollout first). --latest aborts the newest rollout instead of NAME.`,
		example: `  # Abort a rollout
  kubectl dkc rollout abort my-node-config-5fd8t4bhgb-x7k2q

  # Abort the newest rollout
  kubectl dkc rollout abort --latest`,
		operation: "aborted", to: rollout.Aborted, from: []rollout.State{rollout.Running, rollout.Paused, rollout.Halted},
	}
)

// StateOptions holds the flags of pause and abort.
type StateOptions struct {
	Name string
	// Latest is --latest: act on the newest rollout, which NAME must name
	// otherwise.
	Latest    bool
	Namespace string
	verb      verb

	PrintFlags *genericclioptions.PrintFlags
	Printer    printers.ResourcePrinter
	Store      *rollout.Store
	genericiooptions.IOStreams
}

// NewCmdSetState returns the pause or abort command.
func NewCmdSetState(f genericclioptions.RESTClientGetter, streams genericiooptions.IOStreams, v verb) *cobra.Command {
	o := &StateOptions{Namespace: source.DefaultNamespace, verb: v, PrintFlags: util.NewPrintFlags(), IOStreams: streams}
	cmd := &cobra.Command{
		Use:     v.use,
		Short:   v.short,
		Long:    v.long,
		Example: v.example,
		Args:    cobra.MaximumNArgs(1),
		RunE:    lifecycle.RunE(f, o),
	}
	o.PrintFlags.AddFlags(cmd)
	cmd.Flags().BoolVar(&o.Latest, "latest", o.Latest, "Act on the newest rollout instead of NAME.")
	return cmd
}

// Complete fills in the name, namespace, client and printer.
func (o *StateOptions) Complete(f genericclioptions.RESTClientGetter, cmd *cobra.Command, args []string) error {
	var err error
	if o.Name, o.Namespace, err = nameAndNamespace(f, cmd, args); err != nil {
		return err
	}
	if o.Printer, err = util.ToPrinter(o.PrintFlags, util.DryRunNone, o.verb.operation); err != nil {
		return err
	}
	_, o.Store, err = newClients(f, o.Namespace)
	return err
}

// Validate checks that the rollout was named, or --latest given.
func (o *StateOptions) Validate() error {
	return validateNameOrLatest(o.Name, o.Latest, o.Namespace)
}

// Run asks for the state change in the rollout's spec; whichever client
// drives the rollout acts on it.
func (o *StateOptions) Run(ctx context.Context) error {
	r, err := resolve(ctx, o.Store, o.Name)
	if err != nil {
		return err
	}
	got, err := o.Store.Request(ctx, r.Name, o.verb.to, o.verb.from...)
	if err != nil {
		return err
	}
	return o.Printer.PrintObj(got, o.Out)
}

// ResumeOptions holds the flags of `kubectl dkc rollout resume`.
type ResumeOptions struct {
	Name string
	// Latest is --latest: resume the newest rollout, which NAME must name
	// otherwise.
	Latest    bool
	Namespace string
	Wait      bool
	Timeout   time.Duration
	// TimeoutSet is whether --timeout was given.
	TimeoutSet bool

	Client kubernetes.Interface
	Store  *rollout.Store
	genericiooptions.IOStreams
}

// NewCmdResume returns the rollout resume command.
func NewCmdResume(f genericclioptions.RESTClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := &ResumeOptions{Namespace: source.DefaultNamespace, Timeout: DefaultTimeout, IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "resume (NAME | --latest)",
		Short: "Resume a paused rollout, or carry on one whose client died",
		Long: `Resume a paused rollout, or carry on a running one whose client died.
--latest resumes the newest rollout instead of NAME. Where the controller
runs, it drives the rollout and resume returns at once; --wait follows the
rollout until it is done, halted or --timeout passes, and without a
controller drives it from here.

Resume starts from the state kept in the cluster: nodes that run the config
are done, nodes assigned it but not running it yet hold their slot of the
budget, and no node is started twice. A halted rollout cannot be resumed:
undo it, or start a new one with a fixed config.

With --wait, exit codes are those of rollout start --wait: 0 done,
1 failure, 2 halted on a node's error, 3 timeout.`,
		Example: `  # Resume the newest rollout and follow it
  kubectl dkc rollout resume --latest --wait

  # The terminal that drove a rollout was closed: carry it on
  kubectl dkc rollout resume my-node-config-5fd8t4bhgb-x7k2q --wait --timeout 1h`,
		Args: cobra.MaximumNArgs(1),
		RunE: lifecycle.RunE(f, o),
	}
	cmd.Flags().BoolVar(&o.Latest, "latest", o.Latest, "Resume the newest rollout instead of NAME.")
	cmd.Flags().BoolVar(&o.Wait, "wait", o.Wait, "Wait until the rollout is done, halted or the timeout passed, and show its progress; without a controller, drive it from here.")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "How long --wait waits; 0 means forever.")
	return cmd
}

// Complete fills in the name, namespace and clients.
func (o *ResumeOptions) Complete(f genericclioptions.RESTClientGetter, cmd *cobra.Command, args []string) error {
	var err error
	if o.Name, o.Namespace, err = nameAndNamespace(f, cmd, args); err != nil {
		return err
	}
	o.TimeoutSet = cmd.Flags().Changed("timeout")
	o.Client, o.Store, err = newClients(f, o.Namespace)
	return err
}

// Validate checks that the rollout was named, or --latest given, and the
// flags.
func (o *ResumeOptions) Validate() error {
	if err := validateNameOrLatest(o.Name, o.Latest, o.Namespace); err != nil {
		return err
	}
	if o.Timeout < 0 {
		return fmt.Errorf("invalid --timeout %s: must not be negative (0 means forever)", o.Timeout)
	}
	if o.TimeoutSet && !o.Wait {
		return util.ErrTimeoutWithoutWait
	}
	return nil
}

// Run sets a paused rollout running. With --wait it follows the rollout to
// its end, driving it when no controller does; without, it returns once the
// controller has been asked.
func (o *ResumeOptions) Run(ctx context.Context) error {
	r, err := resolve(ctx, o.Store, o.Name)
	if err != nil {
		return err
	}
	if r.State() == rollout.Done {
		fmt.Fprintf(o.Out, "rollout/%s Done\n", r.Name)
		return nil
	}
	lead, err := leader(ctx, o.Client, o.Namespace)
	if err != nil {
		return err
	}
	if lead == "" && !o.Wait {
		return errNoController(o.Namespace)
	}
	if _, err := o.Store.Request(ctx, r.Name, rollout.Running, rollout.Paused); err != nil {
		return err
	}
	if !o.Wait {
		fmt.Fprintf(o.Out, "rollout/%s resumed\n", r.Name)
		fmt.Fprintf(o.ErrOut, "The controller %s drives rollout/%s; follow it with kubectl dkc rollout status %s -w\n", lead, r.Name, r.Name)
		return nil
	}
	return follow(ctx, o.Client, o.Store, lead, r.Name, o.Timeout, o.IOStreams)
}
