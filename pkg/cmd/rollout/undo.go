package rollout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/lifecycle"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// UndoOptions holds the flags of `kubectl dkc rollout undo`.
type UndoOptions struct {
	Name string
	// Latest is --latest: undo the newest rollout that is not an undo,
	// which NAME must name otherwise.
	Latest         bool
	Namespace      string
	MaxUnavailable string
	// Canary is --canary; negative: the undone rollout's.
	Canary int
	// ToRevision is --to-revision, for ncp/POOL: the revision to go back
	// to; 0, the one before the current.
	ToRevision int64
	// Pool is set for ncp/POOL.
	Pool    string
	Wait    bool
	Timeout time.Duration
	// TimeoutSet is whether --timeout was given.
	TimeoutSet bool

	PrintFlags *genericclioptions.PrintFlags
	Printer    printers.ResourcePrinter
	Client     kubernetes.Interface
	Store      *rollout.Store
	genericiooptions.IOStreams
}

// NewUndoOptions returns UndoOptions with the defaults.
func NewUndoOptions(streams genericiooptions.IOStreams) *UndoOptions {
	return &UndoOptions{Namespace: source.DefaultNamespace, Canary: -1, Timeout: DefaultTimeout, PrintFlags: util.NewPrintFlags(), IOStreams: streams}
}

// NewCmdUndo returns the rollout undo command.
func NewCmdUndo(f genericclioptions.RESTClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewUndoOptions(streams)
	cmd := &cobra.Command{
		Use:   "undo (NAME | --latest | ncp/POOL [--to-revision=N])",
		Short: "Take every node a rollout started back to the config it ran before, or a pool back to an earlier revision",
		Long: `Take every node a rollout started back to the assignment it had before
(another config, or its local config), as a new rollout under the same
budget, canary and drain rules; a running or paused rollout is aborted
first. --latest undoes the newest rollout that is not itself an undo. With
ncp/POOL, point the pool back at revision --to-revision (default: the one
before), pinned to that revision's bytes. An undo needs the rights to the
classes and drains it gives back, checked before anything is written.
Details: docs/rollout.md, "Undo".`,
		Example: `  # Undo the newest rollout and follow it
  kubectl dkc rollout undo --latest --wait

  # Undo a halted rollout two nodes at a time, with no canary
  kubectl dkc rollout undo my-node-config-5fd8t4bhgb-x7k2q --max-unavailable 2 --canary 0 --wait

  # The pool workers back to its revision 3
  kubectl dkc rollout undo ncp/workers --to-revision=3 --wait`,
		Args: cobra.MaximumNArgs(1),
		RunE: lifecycle.RunE(f, o),
	}
	o.PrintFlags.AddFlags(cmd)
	cmd.Flags().BoolVar(&o.Latest, "latest", o.Latest, "Undo the newest rollout that is not itself an undo, instead of NAME.")
	cmd.Flags().StringVar(&o.MaxUnavailable, "max-unavailable", "", "As for rollout start (default: the undone rollout's budget).")
	cmd.Flags().Var(&canaryValue{&o.Canary}, "canary", "As for rollout start (default: the undone rollout's canary).")
	cmd.Flags().Int64Var(&o.ToRevision, "to-revision", 0, "With ncp/POOL: the revision to go back to (kubectl dkc rollout history ncp/POOL); default the one before the current.")
	cmd.Flags().BoolVar(&o.Wait, "wait", false, "Wait until the undo is done, halted or the timeout passed; without a controller, drive it from here.")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "How long --wait waits; 0 means forever.")
	return cmd
}

// canaryValue is undo's --canary: an int whose default, negative, is the
// undone rollout's canary, and which help shows as no number.
type canaryValue struct{ p *int }

func (v *canaryValue) String() string {
	if v.p == nil || *v.p < 0 {
		return ""
	}
	return strconv.Itoa(*v.p)
}

func (v *canaryValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return err
	}
	*v.p = n
	return nil
}

func (v *canaryValue) Type() string { return "int" }

// Complete fills in the name, namespace, client and printer.
func (o *UndoOptions) Complete(f genericclioptions.RESTClientGetter, cmd *cobra.Command, args []string) error {
	var err error
	if o.Name, o.Namespace, err = nameAndNamespace(f, cmd, args); err != nil {
		return err
	}
	if name, ok := poolArg(o.Name); ok {
		o.Pool, o.Name = name, ""
	}
	o.TimeoutSet = cmd.Flags().Changed("timeout")
	if o.Printer, err = util.ToPrinter(o.PrintFlags, util.DryRunNone, "started"); err != nil {
		return err
	}
	o.Client, o.Store, err = newClients(f, o.Namespace)
	return err
}

// Validate checks the flags.
func (o *UndoOptions) Validate() error {
	switch {
	case o.Pool != "" && (o.Latest || o.MaxUnavailable != "" || o.Canary >= 0):
		return errors.New("--latest, --max-unavailable and --canary cannot be used with ncp/POOL: a pool rolls back under its own strategy")
	case o.Pool == "" && o.ToRevision != 0:
		return errors.New("--to-revision needs ncp/POOL: a rollout has one revision; undo NAME takes its nodes back to what they ran before it")
	case o.ToRevision < 0:
		return fmt.Errorf("invalid --to-revision %d: must be a revision number (kubectl dkc rollout history ncp/POOL)", o.ToRevision)
	}
	if o.Pool == "" {
		if err := validateNameOrLatest(o.Name, o.Latest, o.Namespace); err != nil {
			return err
		}
	}
	if o.MaxUnavailable != "" {
		if _, err := rollout.ParseMaxUnavailable(o.MaxUnavailable); err != nil {
			return err
		}
	}
	if o.Timeout < 0 {
		return fmt.Errorf("invalid --timeout %s: must not be negative (0 means forever)", o.Timeout)
	}
	if o.TimeoutSet && !o.Wait {
		return util.ErrTimeoutWithoutWait
	}
	return nil
}

// Run aborts the rollout and creates its undo; with --wait it follows the
// undo, or drives it when no controller does.
func (o *UndoOptions) Run(ctx context.Context) error {
	lead, err := leader(ctx, o.Client, o.Namespace)
	if err != nil {
		return err
	}
	if o.Pool != "" {
		if lead == "" {
			return errNoController(o.Namespace)
		}
		if err := undoPool(ctx, o.Client, poolStore(o.Store), o.Store, o.Pool, o.ToRevision, o.Out); err != nil {
			return err
		}
		if !o.Wait {
			return nil
		}
		return followPool(ctx, o.Out, poolStore(o.Store), o.Pool, o.Timeout)
	}
	if lead == "" && !o.Wait {
		return errNoController(o.Namespace)
	}
	store := o.Store
	orig, err := o.original(ctx, store)
	if err != nil {
		return err
	}
	r, err := o.plan(ctx, orig, o.ErrOut)
	if err != nil {
		return err
	}
	if err := util.CheckAuthority(ctx, o.Client, rollout.AllowedClasses(r), rollout.Drains(r)); err != nil {
		return fmt.Errorf("undo rollout %q: %w", orig.Name, err)
	}
	if !orig.State().Terminal() {
		if orig, err = store.Request(ctx, orig.Name, rollout.Aborted, rollout.Running, rollout.Paused); err != nil {
			return err
		}
		// Aborted, it may have started more nodes than planned for: plan
		// again (its warnings were printed the first time).
		if r, err = o.plan(ctx, orig, io.Discard); err != nil {
			return err
		}
	}
	created, err := store.Create(ctx, r, false)
	if err != nil {
		return err
	}
	if err := o.Printer.PrintObj(created, o.Out); err != nil {
		return err
	}
	if !o.Wait {
		fmt.Fprintf(o.ErrOut, "The controller %s drives rollout/%s; follow it with kubectl dkc rollout status %s -w\n", lead, created.Name, created.Name)
		return nil
	}
	return follow(ctx, o.Client, store, lead, created.Name, o.Timeout, o.IOStreams)
}

// plan is the undo of orig, as rollout.Plan makes it from the nodes of
// orig, the configs they run and go back to, and the other rollouts; its
// warnings go to errOut.
func (o *UndoOptions) plan(ctx context.Context, orig *rollout.Rollout, errOut io.Writer) (*rollout.Rollout, error) {
	req := rollout.Request{Namespace: o.Namespace, Suffix: utilrand.String(5)}
	if o.MaxUnavailable != "" {
		v, _ := rollout.ParseMaxUnavailable(o.MaxUnavailable)
		req.MaxUnavailable = &v
	}
	if o.Canary >= 0 {
		req.Canary = &o.Canary
	}
	list, err := o.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	// Which nodes orig started, and what each ran before, is on the nodes.
	var nodes []corev1.Node
	var targets []*corev1.NodeConfigSource
	for _, n := range list.Items {
		m, err := rollout.MarkOf(&n)
		if err != nil || m == nil || m.UID != orig.UID {
			continue
		}
		nodes = append(nodes, n)
		if m.Previous != nil && !slices.ContainsFunc(targets, func(t *corev1.NodeConfigSource) bool { return source.Equal(t, m.Previous) }) {
			targets = append(targets, m.Previous)
		}
	}
	req.UndoOf = orig
	facts, err := factsReader(o.Client, errOut).Read(ctx, nodes, nil, targets)
	if err != nil {
		return nil, err
	}
	if facts.Rollouts, err = o.Store.List(ctx); err != nil {
		return nil, err
	}
	r, warnings, err := rollout.Plan(req, facts)
	printWarnings(errOut, warnings)
	return r, err
}

// original is the rollout to undo: NAME, or with --latest the newest that
// is not an undo.
func (o *UndoOptions) original(ctx context.Context, store *rollout.Store) (*rollout.Rollout, error) {
	if o.Name != "" {
		return store.Get(ctx, o.Name)
	}
	all, err := store.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range all {
		if r.Spec.UndoOf == "" {
			return r, nil
		}
	}
	return nil, fmt.Errorf("%w: no rollout to undo in namespace %q", rollout.ErrNotFound, o.Namespace)
}
