package rollout

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/lifecycle"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/pkg/status"
)

// HistoryOptions holds the flags of `kubectl dkc rollout history`.
type HistoryOptions struct {
	Node string

	PrintFlags *genericclioptions.PrintFlags
	// Printer prints the NodeConfigHistory: the table by default, else
	// as -o says.
	Printer printers.ResourcePrinter
	Client  kubernetes.Interface
	genericiooptions.IOStreams
}

// NewHistoryOptions returns HistoryOptions with the defaults.
func NewHistoryOptions(streams genericiooptions.IOStreams) *HistoryOptions {
	return &HistoryOptions{PrintFlags: genericclioptions.NewPrintFlags(""), IOStreams: streams}
}

// NewCmdHistory returns the rollout history command.
func NewCmdHistory(f genericclioptions.RESTClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewHistoryOptions(streams)
	cmd := &cobra.Command{
		Use:   "history NODE",
		Short: "Show the configs a node ran, when, and how each apply ended",
		Long: fmt.Sprintf(`Show the configs a node's kubelet was put on by its dkc agent, oldest
first: when each apply ended, and how (Applied, RolledBack, Refused, Reset,
Drift). The agent keeps the last %d in the node's annotation %s.
-o json|yaml print a %s object, whose entries are the annotation's
entries as it holds them.`, source.MaxHistory, source.HistoryAnnotation, status.HistoryKind),
		Example: `  # What node-1 ran
  kubectl dkc rollout history node-1

  # How each apply ended, one word a line
  kubectl dkc rollout history node-1 -o jsonpath='{range .entries[*]}{.result}{"\n"}{end}'`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: util.CompleteNodeNames(f),
		RunE:              lifecycle.RunE(f, o),
	}
	o.PrintFlags.AddFlags(cmd)
	return cmd
}

// Complete fills in the node, the printer and the client.
func (o *HistoryOptions) Complete(f genericclioptions.RESTClientGetter, _ *cobra.Command, args []string) error {
	o.Node = args[0]
	if *o.PrintFlags.OutputFormat == "" {
		o.Printer = printers.ResourcePrinterFunc(printHistoryTable)
	} else if p, err := o.PrintFlags.ToPrinter(); err == nil {
		o.Printer = p
	}
	var err error
	o.Client, _, err = newClients(f, source.DefaultNamespace)
	return err
}

// Validate checks the flags.
func (o *HistoryOptions) Validate() error {
	if o.Printer == nil {
		return fmt.Errorf("invalid --output %q: must be one of %s", *o.PrintFlags.OutputFormat, strings.Join(o.PrintFlags.AllowedFormats(), ", "))
	}
	return nil
}

// Run prints the node's history.
func (o *HistoryOptions) Run(ctx context.Context) error {
	node, err := o.Client.CoreV1().Nodes().Get(ctx, o.Node, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node %q: %w", o.Node, err)
	}
	h, err := status.HistoryFromNode(node)
	if err != nil {
		return err
	}
	return o.Printer.PrintObj(h, o.Out)
}

// printHistoryTable prints a NodeConfigHistory as a table, an entry a row.
func printHistoryTable(obj runtime.Object, w io.Writer) error {
	h, ok := obj.(*status.NodeConfigHistory)
	if !ok {
		return fmt.Errorf("history table: unexpected %T", obj)
	}
	tw := printers.GetNewTabWriter(w)
	fmt.Fprintln(tw, "TIME\tRESULT\tCONFIG\tMESSAGE")
	for _, e := range h.Entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Time.UTC().Format(time.RFC3339), e.Result, status.FormatSource(e.Source, true), oneLine(e.Message))
	}
	return tw.Flush()
}
