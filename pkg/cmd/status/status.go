// Package status implements `kubectl dkc status`: what each node was
// assigned, what it runs, its last-known-good config and its error.
package status

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/lifecycle"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/usage"
	"github.com/kubectl-dkc/dkc/pkg/kubeclient/adapt"
	dkcstatus "github.com/kubectl-dkc/dkc/pkg/status"
	"github.com/kubectl-dkc/dkc/pkg/table"
)

// Output formats status handles itself; the others go to cli-runtime's
// printers.
const (
	outputTable = ""
	outputWide  = "wide"
	outputName  = "name"
)

// Options holds the flags of `kubectl dkc status`.
type Options struct {
	Nodes      util.NodeSelection
	PrintFlags *genericclioptions.PrintFlags
	Output     string
	Watch      bool
	WaitFor    string
	Timeout    time.Duration

	Client  kubernetes.Interface
	Printer printers.ResourcePrinter
	genericiooptions.IOStreams

	// rows is the table printed so far, which rows printed while watching
	// go on (printTable).
	rows *table.Stream
}

// NewStatusOptions returns Options with the defaults.
func NewStatusOptions(streams genericiooptions.IOStreams) *Options {
	pf := genericclioptions.NewPrintFlags("")
	// -o name prints node/NAME, which the name printer cannot do for a List.
	pf.NamePrintFlags = nil
	return &Options{PrintFlags: pf, IOStreams: streams}
}

// NewCmdStatus returns the status command.
func NewCmdStatus(f genericclioptions.RESTClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewStatusOptions(streams)
	cmd := &cobra.Command{
		Use:   "status [NODE... | -l SELECTOR | --all]",
		Short: "Show the kubelet config each node was assigned, runs and falls back to",
		Long: `Show the kubelet config each node was assigned, runs (ACTIVE) and falls back
to (LAST-KNOWN-GOOD), as .status.config showed it, whether a dkc agent looks
after the node (AGENT: none, ready, verifying or stale), and its ERROR. -o wide
adds the assignment as requested and the digest it pins. -w prints a row at
each change; --wait-for=active|error waits for every node, then prints the
table. status exits 2 when a node reports an error for its assignment.
Columns, states and exit codes: docs/user-guide.md, "5. Watch it take effect".`,
		Example: `  # Show every node
  kubectl dkc status

  # Watch the nodes of a pool change
  kubectl dkc status -l pool=canary -w

  # Wait up to 5 minutes until node-1 runs its assigned config
  kubectl dkc status node-1 --wait-for=active --timeout=5m

  # Print the old .status.config of node-1
  kubectl dkc status node-1 -o jsonpath='{.items[0].status}'`,
		ValidArgsFunction: util.CompleteNodeNames(f),
		RunE:              lifecycle.RunE(f, o),
	}
	o.PrintFlags.AddFlags(cmd)
	// Replace the help of -o to list the formats status handles itself.
	cmd.Flags().Lookup("output").Usage = fmt.Sprintf("Output format. One of: (%s).", strings.Join(o.AllowedFormats(), ", "))
	o.Nodes.AddFlags(cmd)
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", false, "After listing, watch the nodes and print a row for every change of their config state.")
	cmd.Flags().StringVar(&o.WaitFor, "wait-for", "", `Wait until every selected node reached a condition: "active" or "error". See the exit codes above.`)
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 0, "How long -w watches or --wait-for waits; 0 means forever.")
	_ = cmd.RegisterFlagCompletionFunc("wait-for", cobra.FixedCompletions([]string{dkcstatus.WaitActive, dkcstatus.WaitError}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// AllowedFormats lists the values of -o.
func (o *Options) AllowedFormats() []string {
	return append([]string{outputWide, outputName}, o.PrintFlags.AllowedFormats()...)
}

// Complete fills in the nodes, the client and the printer.
func (o *Options) Complete(f genericclioptions.RESTClientGetter, cmd *cobra.Command, args []string) error {
	o.Nodes.Names = args
	o.Output = *o.PrintFlags.OutputFormat
	if !o.builtinOutput() {
		p, err := util.Printer(o.PrintFlags, outputWide, outputName)
		if err != nil {
			return err
		}
		o.Printer = p
	}
	var err error
	o.Client, err = util.Client(f)
	return err
}

// builtinOutput reports whether -o is a format status prints itself.
func (o *Options) builtinOutput() bool {
	return o.Output == outputTable || o.Output == outputWide || o.Output == outputName
}

// Validate checks the flags.
func (o *Options) Validate() error {
	// Naming no node means every node, as --all does.
	if err := o.Nodes.Validate(true); err != nil {
		return err
	}
	if o.WaitFor != "" {
		if err := dkcstatus.ValidateWaitFor(o.WaitFor); err != nil {
			return err
		}
	}
	if o.Timeout < 0 {
		return fmt.Errorf("invalid --timeout %s: must not be negative (0 means forever)", o.Timeout)
	}
	if o.Timeout > 0 && !o.Watch && o.WaitFor == "" {
		return errors.New("--timeout needs -w/--watch or --wait-for")
	}
	if !o.builtinOutput() && o.Printer == nil {
		return usage.InvalidOutput(o.Output, o.AllowedFormats())
	}
	return nil
}

// Run prints the status once, watches it, or waits for a condition.
func (o *Options) Run(ctx context.Context) error {
	nodes, err := o.Nodes.Resolve(ctx, o.Client)
	if err != nil {
		return err
	}
	var items []dkcstatus.NodeConfig
	var errs []error
	for i := range nodes {
		item, err := dkcstatus.FromNode(&nodes[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		items = append(items, item)
	}
	if err := utilerrors.NewAggregate(errs); err != nil {
		return err
	}
	switch {
	case o.WaitFor != "":
		return o.waitFor(ctx, items)
	case o.Watch:
		return o.watch(ctx, items)
	}
	if err := o.print(items); err != nil {
		return err
	}
	if o.Output == outputTable || o.Output == outputWide {
		if len(items) == 0 {
			fmt.Fprintln(o.ErrOut, "No nodes found.")
		}
		o.warnAgents(items)
	}
	return failed(items)
}

// failed is how a read of items ends: with an error that exits
// dkcstatus.ExitConfigError when a node reports an error for the config
// assigned to it (the rule of --wait-for=active), else nil.
func failed(items []dkcstatus.NodeConfig) error {
	if _, err := dkcstatus.ReachedAll(items, dkcstatus.WaitActive); err != nil {
		return &util.ExitError{Code: dkcstatus.ExitCode(err), Err: err}
	}
	return nil
}

// warnAgents warns on stderr about nodes with an assignment that no agent
// takes up: AGENT none or stale.
func (o *Options) warnAgents(items []dkcstatus.NodeConfig) {
	for _, item := range dkcstatus.NewList(items).Items {
		if item.ConfigSource == nil {
			continue
		}
		if cause := dkcstatus.AgentCause(item.Agent); cause != "" {
			fmt.Fprintf(o.ErrOut, "Warning: node/%s has an assignment, but %s\n", item.Name, cause)
		}
	}
}

// print writes items in the -o format.
func (o *Options) print(items []dkcstatus.NodeConfig) error {
	switch o.Output {
	case outputTable, outputWide:
		return o.printTable(items)
	case outputName:
		// node/NAME, as kubectl get nodes -o name prints it, so that the
		// names chain into kubectl; a NodeConfig's own would not.
		p := &printers.NamePrinter{}
		for _, item := range dkcstatus.NewList(items).Items {
			node := &corev1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: item.Name}}
			if err := p.PrintObj(node, o.Out); err != nil {
				return err
			}
		}
		return nil
	}
	return o.Printer.PrintObj(dkcstatus.NewList(items), o.Out)
}

// printTable prints items as rows of the status table, as kubectl get -w
// prints a watch: the header once, before the first row, and each row
// aligned with the rows printed before.
func (o *Options) printTable(items []dkcstatus.NodeConfig) error {
	if o.rows == nil {
		o.rows = table.NewStream(o.Out)
	}
	return o.rows.Print(dkcstatus.Table(items, o.Output == outputWide))
}

// printChanges writes changed items while watching: table rows under the
// table printed before, one line per name, or one object each.
func (o *Options) printChanges(changed []dkcstatus.NodeConfig) error {
	switch o.Output {
	case outputTable, outputWide:
		return o.printTable(changed)
	case outputName:
		return o.print(changed)
	}
	for i := range changed {
		if err := o.Printer.PrintObj(runtime.Object(&changed[i]), o.Out); err != nil {
			return err
		}
	}
	return nil
}

// watch prints items, then a row for every change, until ctx ends or the
// timeout passes. It ends as a read of the rows it printed last does
// (failed).
func (o *Options) watch(ctx context.Context, items []dkcstatus.NodeConfig) error {
	if err := o.print(items); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	if o.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
	}
	defer cancel()
	printed := map[string]dkcstatus.NodeConfig{}
	for _, item := range items {
		printed[item.Name] = item
	}
	scope := dkcstatus.Scope{Names: o.Nodes.Names, LabelSelector: o.Nodes.Selector}
	err := dkcstatus.Watch(ctx, adapt.Clientset(o.Client), scope, func(changed, _ []dkcstatus.NodeConfig) (bool, error) {
		// The first call lists every node again: print only what changed
		// since the table above.
		var rows []dkcstatus.NodeConfig
		for _, item := range changed {
			if old, ok := printed[item.Name]; ok && sameState(old, item) {
				continue
			}
			printed[item.Name] = item
			rows = append(rows, item)
		}
		if len(rows) == 0 {
			return false, nil
		}
		return false, o.printChanges(rows)
	})
	if ctx.Err() != nil {
		last := make([]dkcstatus.NodeConfig, 0, len(printed))
		for _, item := range printed {
			last = append(last, item)
		}
		return failed(last)
	}
	return err
}

// waitFor waits until every node in items reached --wait-for, then prints
// them.
func (o *Options) waitFor(ctx context.Context, items []dkcstatus.NodeConfig) error {
	names := make([]string, len(items))
	for i, item := range items {
		names[i] = item.Name
	}
	if len(names) == 0 {
		return errors.New("no nodes to wait for")
	}
	var onChange func([]dkcstatus.NodeConfig)
	if o.Watch {
		if err := o.print(items); err != nil {
			return err
		}
		printed := map[string]dkcstatus.NodeConfig{}
		for _, item := range items {
			printed[item.Name] = item
		}
		onChange = func(changed []dkcstatus.NodeConfig) {
			var rows []dkcstatus.NodeConfig
			for _, item := range changed {
				if old, ok := printed[item.Name]; ok && sameState(old, item) {
					continue
				}
				printed[item.Name] = item
				rows = append(rows, item)
			}
			if len(rows) > 0 {
				_ = o.printChanges(rows)
			}
		}
	}
	last, err := dkcstatus.Wait(ctx, adapt.Clientset(o.Client), names, o.WaitFor, o.Timeout, onChange)
	if !o.Watch && len(last) > 0 {
		if perr := o.print(last); perr != nil && err == nil {
			err = perr
		}
	}
	if err != nil {
		return &util.ExitError{Code: dkcstatus.ExitCode(err), Err: err}
	}
	return nil
}

// sameState reports whether a and b show the same row.
func sameState(a, b dkcstatus.NodeConfig) bool {
	return apiequality.Semantic.DeepEqual(a, b)
}
