package rollout

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/lifecycle"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/usage"
	"github.com/kubectl-dkc/dkc/pkg/pool"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/status"
	"github.com/kubectl-dkc/dkc/pkg/table"
)

// ListOptions holds the flags of `kubectl dkc rollout list`.
type ListOptions struct {
	Namespace  string
	PrintFlags *genericclioptions.PrintFlags
	Printer    printers.ResourcePrinter
	Store      *rollout.Store
	genericiooptions.IOStreams
}

// NewCmdList returns the rollout list command.
func NewCmdList(f genericclioptions.RESTClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := &ListOptions{PrintFlags: genericclioptions.NewPrintFlags(""), IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the rollouts of the config namespace, newest first",
		Long: `List the NodeConfigRollouts of the config namespace (-n, default
kube-system), newest first: their state, the pool and revision they roll
out (for a pool's), their config, how many of their nodes are done, and
their age. -o json|yaml print the list of objects.`,
		Example: `  # Every rollout
  kubectl dkc rollout list

  # The names of the halted ones
  kubectl dkc rollout list -o jsonpath='{range .items[?(@.status.state=="Halted")]}{.metadata.name}{"\n"}{end}'`,
		Args: cobra.NoArgs,
		RunE: lifecycle.RunE(f, o),
	}
	o.PrintFlags.AddFlags(cmd)
	return cmd
}

// Complete fills in the namespace, printer and store.
func (o *ListOptions) Complete(f genericclioptions.RESTClientGetter, cmd *cobra.Command, _ []string) error {
	var err error
	if o.Namespace, err = util.ConfigNamespace(f, cmd); err != nil {
		return err
	}
	if *o.PrintFlags.OutputFormat == "" {
		o.Printer = table.Printer(rolloutTable)
	} else if p, err := o.PrintFlags.ToPrinter(); err == nil {
		o.Printer = p
	}
	_, o.Store, err = newClients(f, o.Namespace)
	return err
}

// Validate checks -o.
func (o *ListOptions) Validate() error {
	if o.Printer == nil {
		return usage.InvalidOutput(*o.PrintFlags.OutputFormat, o.PrintFlags.AllowedFormats())
	}
	return nil
}

// Run lists the rollouts.
func (o *ListOptions) Run(ctx context.Context) error {
	all, err := o.Store.List(ctx)
	if err != nil {
		return err
	}
	list := &rollout.RolloutList{}
	list.Kind, list.APIVersion = rollout.Kind+"List", status.SchemeGroupVersion.String()
	for _, r := range all {
		list.Items = append(list.Items, *r)
	}
	if len(list.Items) == 0 && *o.PrintFlags.OutputFormat == "" {
		fmt.Fprintf(o.ErrOut, "No rollouts found in %s namespace.\n", o.Namespace)
		return nil
	}
	return util.PrintList(o.Printer, *o.PrintFlags.OutputFormat, list, o.Out)
}

// rolloutTable makes the table of a RolloutList, a rollout a row.
func rolloutTable(obj runtime.Object) (*metav1.Table, error) {
	list, ok := obj.(*rollout.RolloutList)
	if !ok {
		return nil, fmt.Errorf("rollout list: unexpected %T", obj)
	}
	t := table.New("Name", "State", "Pool", "Revision", "Config", "Nodes", "Done", "Age")
	for i := range list.Items {
		r := &list.Items[i]
		done := 0
		for _, n := range r.Spec.Nodes {
			if r.NodeStatus(n).Phase.Finished() {
				done++
			}
		}
		table.AddRow(t, r.Name, string(r.State()), table.OrNone(r.Labels[pool.Label]), table.OrNone(r.Labels[pool.RevisionLabel]),
			rollout.DescribeTarget(r.Spec.Config), len(r.Spec.Nodes), done, duration.HumanDuration(time.Since(r.CreationTimestamp.Time)))
	}
	return t, nil
}
