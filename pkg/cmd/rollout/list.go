package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/kubectl-dkc/dkc/pkg/apis/dkc/v1alpha1"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/lifecycle"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/usage"
	"github.com/kubectl-dkc/dkc/pkg/pool"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/table"
)

// ListOptions holds the flags of `kubectl dkc rollout list`.
type ListOptions struct {
	Namespace string
	// Selector is -l: only the rollouts whose labels match.
	Selector string
	// Watch is -w: after the list, a row for every rollout that changes.
	Watch bool
	// Wide is -o wide: the table with each rollout's budget and reason.
	Wide bool

	PrintFlags *genericclioptions.PrintFlags
	Printer    printers.ResourcePrinter
	Store      *rollout.Store
	genericiooptions.IOStreams

	selector labels.Selector
	// interval is how often -w lists the rollouts again.
	interval time.Duration
}

// NewCmdList returns the rollout list command.
func NewCmdList(f genericclioptions.RESTClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := &ListOptions{PrintFlags: genericclioptions.NewPrintFlags(""), IOStreams: streams, interval: 2 * time.Second}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the rollouts of the config namespace, newest first",
		Long: `List the NodeConfigRollouts of the config namespace (-n, default
kube-system), newest first: their state, the pool and revision they roll
out (for a pool's), their config, how many of their nodes are done, and
their age. -o wide adds their budget (MAX-UNAVAILABLE, CANARY) and why they
halted or were aborted (REASON); -o json|yaml print the list of objects.
-l selects rollouts by label (a pool's carry kubectl-dkc.io/pool=POOL).
-w/--watch then prints a row for every rollout that changes, until
interrupted.`,
		Example: `  # Every rollout
  kubectl dkc rollout list

  # The rollouts of pool workers, as they change
  kubectl dkc rollout list -l kubectl-dkc.io/pool=workers -w

  # The names of the halted ones
  kubectl dkc rollout list -o jsonpath='{range .items[?(@.status.state=="Halted")]}{.metadata.name}{"\n"}{end}'`,
		Args: cobra.NoArgs,
		RunE: lifecycle.RunE(f, o),
	}
	o.PrintFlags.AddFlags(cmd)
	cmd.Flags().Lookup("output").Usage = fmt.Sprintf("Output format. One of: (%s).", strings.Join(o.allowedFormats(), ", "))
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", "", "Selector (label query) to filter rollouts on, supports '=', '==', '!=', 'in', 'notin' (e.g. -l key1=value1,key2=value2).")
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", false, "After listing, print a row for every rollout that changes, until interrupted.")
	return cmd
}

// allowedFormats are the -o formats of list: wide, and PrintFlags'.
func (o *ListOptions) allowedFormats() []string {
	return append([]string{"wide"}, o.PrintFlags.AllowedFormats()...)
}

// Complete fills in the namespace, printer and store.
func (o *ListOptions) Complete(f genericclioptions.RESTClientGetter, cmd *cobra.Command, _ []string) error {
	var err error
	if o.Namespace, err = util.ConfigNamespace(f, cmd); err != nil {
		return err
	}
	switch *o.PrintFlags.OutputFormat {
	case "", "wide":
		o.Wide = *o.PrintFlags.OutputFormat == "wide"
		o.Printer = table.Printer(rolloutTable(o.Wide))
	default:
		if p, err := o.PrintFlags.ToPrinter(); err == nil {
			o.Printer = p
		}
	}
	_, o.Store, err = newClients(f, o.Namespace)
	return err
}

// Validate checks -o, -l and -w.
func (o *ListOptions) Validate() error {
	if o.Printer == nil {
		return usage.InvalidOutput(*o.PrintFlags.OutputFormat, o.allowedFormats())
	}
	sel, err := labels.Parse(o.Selector)
	if err != nil {
		return fmt.Errorf("invalid --selector %q: %w", o.Selector, err)
	}
	o.selector = sel
	if o.Watch && *o.PrintFlags.OutputFormat != "" && !o.Wide {
		return errors.New("-w/--watch prints table rows: it can be used with -o wide, not other formats")
	}
	return nil
}

// Run lists the rollouts; with -w, it then prints a row for each rollout
// that changes, until interrupted.
func (o *ListOptions) Run(ctx context.Context) error {
	list, err := o.list(ctx)
	if err != nil {
		return err
	}
	if !o.Watch {
		if len(list.Items) == 0 && *o.PrintFlags.OutputFormat == "" {
			fmt.Fprintf(o.ErrOut, "No rollouts found in %s namespace.\n", o.Namespace)
			return nil
		}
		return util.PrintList(o.Printer, *o.PrintFlags.OutputFormat, list, o.Out)
	}
	stream := table.NewStream(o.Out)
	toTable := rolloutTable(o.Wide)
	// What each row printed showed, but its age: a rollout whose spec,
	// status or labels change gets a new row.
	printed := map[string]string{}
	for {
		var changed rollout.RolloutList
		for _, r := range list.Items {
			shown, err := json.Marshal([]any{r.Labels, r.Spec, r.Status})
			if err != nil {
				return err
			}
			if old, ok := printed[r.Name]; !ok || old != string(shown) {
				printed[r.Name] = string(shown)
				changed.Items = append(changed.Items, r)
			}
		}
		if len(changed.Items) > 0 {
			t, err := toTable(&changed)
			if err != nil {
				return err
			}
			if err := stream.Print(t); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.interval):
		}
		if list, err = o.list(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// list returns the rollouts that -l selects, newest first.
func (o *ListOptions) list(ctx context.Context) (*rollout.RolloutList, error) {
	all, err := o.Store.List(ctx)
	if err != nil {
		return nil, err
	}
	list := &rollout.RolloutList{}
	list.Kind, list.APIVersion = rollout.Kind+"List", v1alpha1.SchemeGroupVersion.String()
	for _, r := range all {
		if o.selector == nil || o.selector.Matches(labels.Set(r.Labels)) {
			list.Items = append(list.Items, *r)
		}
	}
	return list, nil
}

// rolloutTable makes the table of a RolloutList, a rollout a row; wide adds
// each rollout's budget and reason.
func rolloutTable(wide bool) func(runtime.Object) (*metav1.Table, error) {
	return func(obj runtime.Object) (*metav1.Table, error) {
		list, ok := obj.(*rollout.RolloutList)
		if !ok {
			return nil, fmt.Errorf("rollout list: unexpected %T", obj)
		}
		columns := []string{"Name", "State", "Pool", "Revision", "Config", "Nodes", "Done", "Age"}
		if wide {
			columns = append(columns, "Max-Unavailable", "Canary", "Reason")
		}
		t := table.New(columns...)
		for i := range list.Items {
			r := &list.Items[i]
			c := r.Status.Counts
			done := c.Updated + c.Skipped
			nodes := len(r.Spec.Nodes)
			if !rollout.Lists(r) {
				nodes = c.Waiting + c.InProgress + c.Updated + c.Skipped + c.Failed
			}
			cells := []any{r.Name, string(r.State()), table.OrNone(r.Labels[pool.Label]), table.OrNone(r.Labels[pool.RevisionLabel]),
				rollout.DescribeTarget(r.Spec.Config), nodes, done, duration.HumanDuration(time.Since(r.CreationTimestamp.Time))}
			if wide {
				cells = append(cells, r.Spec.MaxUnavailable.String(), r.Spec.Canary, table.OrNone(table.OneLine(r.Status.Reason)))
			}
			table.AddRow(t, cells...)
		}
		return t, nil
	}
}
