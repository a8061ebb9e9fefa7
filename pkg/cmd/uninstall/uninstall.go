// Package uninstall implements `kubectl dkc uninstall`: take dkc out of
// a cluster, leaving nothing of it behind on the Nodes. The work happens
// in pkg/install.
package uninstall

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	cmdrollout "github.com/kubectl-dkc/dkc/pkg/cmd/rollout"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/lifecycle"
	"github.com/kubectl-dkc/dkc/pkg/install"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/source"
	dkcstatus "github.com/kubectl-dkc/dkc/pkg/status"
)

// DefaultTimeout bounds the reset of the nodes, and then the removal.
const DefaultTimeout = 30 * time.Minute

// ResetRollout names the rollout that --reset-nodes starts.
const ResetRollout = "kubectl-dkc-uninstall"

// Options holds the flags of `kubectl dkc uninstall`.
type Options struct {
	ResetNodes     bool
	MaxUnavailable string
	Timeout        time.Duration

	PrintFlags *genericclioptions.PrintFlags

	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	Mapper  meta.RESTMapper
	genericiooptions.IOStreams
}

// NewUninstallOptions returns Options with the defaults.
func NewUninstallOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{MaxUnavailable: strconv.Itoa(rollout.DefaultMaxUnavailable), Timeout: DefaultTimeout, PrintFlags: util.NewPrintFlags(), IOStreams: streams}
}

// NewCmdUninstall returns the uninstall command.
func NewCmdUninstall(f genericclioptions.RESTClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewUninstallOptions(streams)
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove dkc from the cluster, and its annotations and condition from every Node",
		Long: `Remove dkc from the cluster, and its annotations and condition from every Node.

uninstall refuses while a NodeConfigRollout or a NodeConfigPool exists or a
node holds an assignment: without its agent, such a node would stay on its
assigned config with nothing to report on it or take it back. With
--reset-nodes it first sends every assigned node back to its local config in a
rollout (--max-unavailable at a time) and waits for it.

It then deletes what kubectl dkc install creates, with either --agent, and
waits until it is gone (the agents' and the controller's pods with it), the
controller's Lease, and every kubectl-dkc.io/ annotation and label, the
KubeletConfigOK condition and the startup taint from every Node. The
ConfigMaps made by kubectl dkc push stay, and so does each node's store,
/var/lib/kubectl-dkc.

Exit codes: 0 removed, 1 an error or a refusal, 2 the reset halted on a
node's error, 3 --timeout passed first.`,
		Example: `  # Remove dkc from a cluster where no node holds an assignment
  kubectl dkc uninstall

  # Send every node back to its local config, two at a time, then remove dkc
  kubectl dkc uninstall --reset-nodes --max-unavailable 2`,
		Args: cobra.NoArgs,
		RunE: lifecycle.RunE(f, o),
	}
	cmd.Flags().BoolVar(&o.ResetNodes, "reset-nodes", o.ResetNodes, "First send every node that holds an assignment back to its local config, in a rollout, and wait for it.")
	cmd.Flags().StringVar(&o.MaxUnavailable, "max-unavailable", o.MaxUnavailable, "With --reset-nodes: how many nodes restart their kubelet at once, a count or a percentage.")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "How long to wait for the reset of the nodes, and then for the removal.")
	return cmd
}

// Complete fills in the clients.
func (o *Options) Complete(f genericclioptions.RESTClientGetter, _ *cobra.Command, _ []string) error {
	var err error
	o.Client, o.Dynamic, o.Mapper, err = util.ObjectClients(f)
	return err
}

// Validate checks the flags.
func (o *Options) Validate() error {
	if _, err := rollout.ParseMaxUnavailable(o.MaxUnavailable); err != nil {
		return err
	}
	if o.Timeout <= 0 {
		return fmt.Errorf("invalid --timeout %s: must be positive", o.Timeout)
	}
	return nil
}

// Run checks, resets the nodes when asked to, and removes dkc.
func (o *Options) Run(ctx context.Context) error {
	objs, err := install.Installed()
	if err != nil {
		return err
	}
	b, err := install.FindBlockers(ctx, o.Client, o.Dynamic)
	if err != nil {
		return err
	}
	if err := b.Err(o.ResetNodes); err != nil {
		return err
	}
	if len(b.Assigned) > 0 {
		if err := o.resetNodes(ctx, b.Assigned); err != nil {
			return err
		}
	}
	deleted, err := util.ToPrinter(o.PrintFlags, util.DryRunNone, install.Deleted)
	if err != nil {
		return err
	}
	a := &install.Applier{Dynamic: o.Dynamic, Mapper: o.Mapper}
	err = a.DeleteAll(ctx, objs, o.Timeout, func(obj *unstructured.Unstructured, outcome string) error {
		if outcome != install.Deleted {
			return nil
		}
		return deleted.PrintObj(obj, o.Out)
	})
	if err != nil {
		if wait.Interrupted(err) && ctx.Err() == nil {
			return &util.ExitError{Code: dkcstatus.ExitTimeout, Err: err}
		}
		return err
	}
	if _, err := install.DeleteLease(ctx, o.Client, source.DefaultNamespace); err != nil {
		return err
	}
	cleaned, err := install.CleanNodes(ctx, o.Client)
	for _, n := range cleaned {
		fmt.Fprintf(o.Out, "node/%s cleaned\n", n)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(o.ErrOut, "kubectl dkc uninstalled. Left in place: the ConfigMaps of kubectl dkc push (kubectl -n %s get configmaps -l %s) and each node's store, /var/lib/kubectl-dkc.\n", source.DefaultNamespace, source.ConfigLabel)
	return nil
}

// resetNodes sends nodes back to their local config in a rollout, as
// kubectl dkc rollout start --to-local --wait does, then deletes the
// rollout, and checks that nothing blocks the removal any more.
func (o *Options) resetNodes(ctx context.Context, nodes []string) error {
	start := cmdrollout.NewStartOptions(o.IOStreams)
	start.Nodes.Names = nodes
	start.ToLocal = true
	start.Name = ResetRollout
	start.MaxUnavailable = o.MaxUnavailable
	start.Wait = true
	start.Timeout = o.Timeout
	start.Client = o.Client
	start.Store = &rollout.Store{Client: o.Dynamic, Namespace: start.Namespace}
	var err error
	if start.Printer, err = util.ToPrinter(start.PrintFlags, util.DryRunNone, "started"); err != nil {
		return err
	}
	if err := start.Validate(); err != nil {
		return err
	}
	if err := start.Run(ctx); err != nil {
		return fmt.Errorf("reset the nodes: %w", err)
	}
	if err := o.Dynamic.Resource(rollout.Resource).Namespace(start.Namespace).Delete(ctx, ResetRollout, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete rollout %s/%s: %w", start.Namespace, ResetRollout, err)
	}
	b, err := install.FindBlockers(ctx, o.Client, o.Dynamic)
	if err != nil {
		return err
	}
	if err := b.Err(false); err != nil {
		return errors.Join(errors.New("the nodes were reset, but"), err)
	}
	return nil
}
