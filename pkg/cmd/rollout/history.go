package rollout

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/usage"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/pkg/status"
	"github.com/kubectl-dkc/dkc/pkg/table"
)

// HistoryOptions holds the flags of `kubectl dkc rollout history`.
type HistoryOptions struct {
	Node string
	// Pool is set for ncp/POOL: the pool's revisions instead of a node's
	// history.
	Pool string

	PrintFlags *genericclioptions.PrintFlags
	// Printer prints the NodeConfigHistory: the table by default, else
	// as -o says.
	Printer printers.ResourcePrinter
	Client  kubernetes.Interface
	Store   *rollout.Store
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
		Use:   "history (NODE | ncp/POOL)",
		Short: "Show the configs a node ran, or a pool's revisions",
		Long: fmt.Sprintf(`Show the configs a node's kubelet was put on by its dkc agent, oldest
first: when each apply ended, and how (Applied, RolledBack, Refused, Reset,
Drift). The agent keeps the last %d in the node's annotation %s.
-o json|yaml print a %s object, whose entries are the annotation's
entries as it holds them.

With ncp/POOL, the revisions of a NodeConfigPool, oldest first, as kubectl
rollout history lists a Deployment's: each revision's config, the sha256 it
pinned, the classes it allowed, its rollouts and how the newest ended.
kubectl dkc rollout undo ncp/POOL --to-revision=N goes back to one.`, source.MaxHistory, source.HistoryAnnotation, status.HistoryKind),
		Example: `  # What node-1 ran
  kubectl dkc rollout history node-1

  # The revisions of the pool workers
  kubectl dkc rollout history ncp/workers

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
func (o *HistoryOptions) Complete(f genericclioptions.RESTClientGetter, cmd *cobra.Command, args []string) error {
	o.Node = args[0]
	if name, ok := poolArg(args[0]); ok {
		o.Pool, o.Node = name, ""
		ns, err := util.ConfigNamespace(f, cmd)
		if err != nil {
			return err
		}
		o.Client, o.Store, err = newClients(f, ns)
		return err
	}
	o.Node = strings.TrimPrefix(o.Node, "node/")
	if *o.PrintFlags.OutputFormat == "" {
		o.Printer = table.Printer(historyTable)
	} else if p, err := o.PrintFlags.ToPrinter(); err == nil {
		o.Printer = p
	}
	var err error
	o.Client, _, err = newClients(f, source.DefaultNamespace)
	return err
}

// Validate checks the flags.
func (o *HistoryOptions) Validate() error {
	if o.Pool != "" && *o.PrintFlags.OutputFormat != "" {
		return errors.New("-o cannot be used with ncp/POOL: its revisions are the rollouts that kubectl get ncr -l kubectl-dkc.io/pool=POOL prints")
	}
	if o.Pool == "" && o.Printer == nil {
		return usage.InvalidOutput(*o.PrintFlags.OutputFormat, o.PrintFlags.AllowedFormats())
	}
	return nil
}

// Run prints the node's history, or the pool's revisions.
func (o *HistoryOptions) Run(ctx context.Context) error {
	if o.Pool != "" {
		p, revs, err := poolRevisions(ctx, poolStore(o.Store), o.Store, o.Pool)
		if err != nil {
			return err
		}
		return printPoolHistory(o.IOStreams, p, revs)
	}
	node, err := o.Client.CoreV1().Nodes().Get(ctx, o.Node, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node %q: %w", o.Node, err)
	}
	h, err := status.HistoryFromNode(node)
	if err != nil {
		return err
	}
	if len(h.Entries) == 0 && *o.PrintFlags.OutputFormat == "" {
		fmt.Fprintf(o.ErrOut, "No history found for node/%s.\n", o.Node)
		return nil
	}
	return o.Printer.PrintObj(h, o.Out)
}

// historyTable makes the table of a NodeConfigHistory, an entry a row.
func historyTable(obj runtime.Object) (*metav1.Table, error) {
	h, ok := obj.(*status.NodeConfigHistory)
	if !ok {
		return nil, fmt.Errorf("history table: unexpected %T", obj)
	}
	t := table.New("Time", "Result", "Config", "Message")
	for _, e := range h.Entries {
		table.AddRow(t, e.Time.UTC().Format(time.RFC3339), e.Result, status.FormatSource(e.Source, true), table.OneLine(e.Message))
	}
	return t, nil
}
