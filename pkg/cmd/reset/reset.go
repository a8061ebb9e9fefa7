// Package reset implements `kubectl dkc reset`: send nodes back to their
// local kubelet config.
package reset

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/lifecycle"
	"github.com/kubectl-dkc/dkc/pkg/kubeclient/adapt"
	"github.com/kubectl-dkc/dkc/pkg/source"
	dkcstatus "github.com/kubectl-dkc/dkc/pkg/status"
)

// DefaultTimeout bounds --wait.
const DefaultTimeout = 5 * time.Minute

// Options holds the flags of `kubectl dkc reset`.
type Options struct {
	Nodes   util.NodeSelection
	DryRun  string
	Wait    bool
	Timeout time.Duration
	// TimeoutSet is whether --timeout was given.
	TimeoutSet bool

	PrintFlags *genericclioptions.PrintFlags

	Client kubernetes.Interface
	genericiooptions.IOStreams
}

// NewResetOptions returns Options with the defaults.
func NewResetOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{DryRun: util.DryRunNone, Timeout: DefaultTimeout, PrintFlags: util.NewPrintFlags(), IOStreams: streams}
}

// NewCmdReset returns the reset command.
func NewCmdReset(f genericclioptions.RESTClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewResetOptions(streams)
	cmd := &cobra.Command{
		Use:   "reset (NODE... | -l SELECTOR | --all)",
		Short: "Send nodes back to their local kubelet config",
		Long: `Send nodes back to their local kubelet config, as removing spec.configSource
did: reset removes the assignment from whichever carrier holds it, and the
dkc agent restarts the kubelet on the node's own config file; --wait waits
until every node runs it. Every selected kubelet with an assignment restarts
at once: rollout start --to-local restarts them a few at a time.
Output and exit codes: docs/user-guide.md, "6. Go back to the local config".`,
		Example: `  # Send node-1 back to its local config
  kubectl dkc reset node-1

  # Reset every node labelled pool=canary and wait until they run it
  kubectl dkc reset -l pool=canary --wait --timeout=10m`,
		ValidArgsFunction: util.CompleteNodeNames(f),
		RunE:              lifecycle.RunE(f, o),
	}
	o.Nodes.AddFlags(cmd)
	util.AddDryRunFlag(cmd, &o.DryRun, `Must be "none", "client", or "server". With client, only print what would be reset; with server, send the patches as server-side dry-runs.`)
	cmd.Flags().BoolVar(&o.Wait, "wait", o.Wait, "Wait until every node runs its local config.")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "How long --wait waits; 0 means forever.")
	o.PrintFlags.AddFlags(cmd)
	return cmd
}

// Complete fills in the nodes and the client.
func (o *Options) Complete(f genericclioptions.RESTClientGetter, cmd *cobra.Command, args []string) error {
	o.Nodes.Names = args
	o.TimeoutSet = cmd.Flags().Changed("timeout")
	var err error
	o.Client, err = util.Client(f)
	return err
}

// Validate checks the flags.
func (o *Options) Validate() error {
	if err := o.Nodes.Validate(false); err != nil {
		return err
	}
	if err := util.ValidateDryRun(o.DryRun); err != nil {
		return err
	}
	if o.Wait && o.DryRun != util.DryRunNone {
		return errors.New("--wait cannot be used with --dry-run: nothing would change to wait for")
	}
	if o.Timeout < 0 {
		return fmt.Errorf("invalid --timeout %s: must not be negative (0 means forever)", o.Timeout)
	}
	if o.TimeoutSet && !o.Wait {
		return util.ErrTimeoutWithoutWait
	}
	if _, err := util.Printer(o.PrintFlags); err != nil {
		return err
	}
	return nil
}

// Run resets every selected node and waits when asked to.
func (o *Options) Run(ctx context.Context) error {
	nodes, err := o.Nodes.Resolve(ctx, o.Client)
	if err != nil {
		return err
	}
	o.warnRestarts(nodes)
	var errs []error
	var names []string
	for i := range nodes {
		if err := o.reset(ctx, &nodes[i]); err != nil {
			errs = append(errs, err)
			continue
		}
		names = append(names, nodes[i].Name)
	}
	if err := utilerrors.NewAggregate(errs); err != nil {
		return err
	}
	if !o.Wait {
		return nil
	}
	_, err = dkcstatus.Wait(ctx, adapt.Clientset(o.Client), names, dkcstatus.WaitActive, o.Timeout, nil)
	if err != nil {
		return &util.ExitError{Code: dkcstatus.ExitCode(err), Err: err}
	}
	return nil
}

// warnRestarts warns when more than one node has an assignment to remove:
// their kubelets restart at once.
func (o *Options) warnRestarts(nodes []corev1.Node) {
	changing := 0
	for i := range nodes {
		if src, _, err := source.Assigned(&nodes[i]); err != nil || src != nil {
			changing++
		}
	}
	if changing > 1 {
		fmt.Fprintf(o.ErrOut, "Warning: %d nodes go back to their local config at once, and their kubelets all restart at the same time; to restart a few at a time, use kubectl dkc rollout start --to-local\n", changing)
	}
}

// reset removes node's assignment and prints the result. A node without
// one is left alone; one whose assignment cannot be read is reset all the
// same.
func (o *Options) reset(ctx context.Context, node *corev1.Node) error {
	src, _, err := source.Assigned(node)
	if err == nil && src == nil {
		return o.print(node, "already on its local config", util.DryRunNone)
	}
	// A nil source clears both carriers, whichever is named.
	patch, err := source.AssignPatch(source.Annotation, nil, nil)
	if err != nil {
		return fmt.Errorf("reset node %q: %w", node.Name, err)
	}
	if o.DryRun == util.DryRunClient {
		got, err := source.PatchedNode(node, patch)
		if err != nil {
			return fmt.Errorf("reset node %q: %w", node.Name, err)
		}
		return o.print(got, "reset to its local config", o.DryRun)
	}
	opts := metav1.PatchOptions{FieldManager: source.FieldManager}
	if o.DryRun == util.DryRunServer {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	got, err := o.Client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, opts)
	if err != nil {
		return fmt.Errorf("reset node %q: %w", node.Name, err)
	}
	return o.print(got, "reset to its local config", o.DryRun)
}

// print prints node with operation, marked as dryRun says.
func (o *Options) print(node *corev1.Node, operation, dryRun string) error {
	p, err := util.ToPrinter(o.PrintFlags, dryRun, operation)
	if err != nil {
		return err
	}
	return p.PrintObj(node, o.Out)
}
