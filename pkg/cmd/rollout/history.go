package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/lifecycle"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/pkg/status"
)

// HistoryOptions holds the flags of `kubectl dkc rollout history`.
type HistoryOptions struct {
	Node   string
	Output string

	Client kubernetes.Interface
	genericiooptions.IOStreams
}

// NewCmdHistory returns the rollout history command.
func NewCmdHistory(f genericclioptions.RESTClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := &HistoryOptions{IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "history NODE",
		Short: "Show the configs a node ran, when, and how each apply ended",
		Long: fmt.Sprintf(`Show the configs a node's kubelet was put on by its dkc agent, oldest
first: when each apply ended, and how (Applied, RolledBack, Refused, Reset,
Drift). The agent keeps the last %d in the node's annotation %s.
-o json|yaml print the entries as the annotation holds them.`, source.MaxHistory, source.HistoryAnnotation),
		Example: `  # What node-1 ran
  kubectl dkc rollout history node-1`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: util.CompleteNodeNames(f),
		RunE:              lifecycle.RunE(f, o),
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", "", "Output format. One of: (json, yaml).")
	return cmd
}

// Complete fills in the node and the client.
func (o *HistoryOptions) Complete(f genericclioptions.RESTClientGetter, _ *cobra.Command, args []string) error {
	o.Node = args[0]
	var err error
	o.Client, _, err = newClients(f, source.DefaultNamespace)
	return err
}

// Validate checks the flags.
func (o *HistoryOptions) Validate() error {
	switch o.Output {
	case "", "json", "yaml":
		return nil
	}
	return fmt.Errorf("invalid --output %q: must be json or yaml", o.Output)
}

// Run prints the node's history.
func (o *HistoryOptions) Run(ctx context.Context) error {
	node, err := o.Client.CoreV1().Nodes().Get(ctx, o.Node, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node %q: %w", o.Node, err)
	}
	h, err := source.History(node)
	if err != nil {
		return err
	}
	if h == nil {
		h = []source.HistoryEntry{}
	}
	switch o.Output {
	case "json":
		b, err := json.MarshalIndent(h, "", "    ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(o.Out, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(h)
		if err != nil {
			return err
		}
		_, err = o.Out.Write(b)
		return err
	}
	tw := printers.GetNewTabWriter(o.Out)
	fmt.Fprintln(tw, "TIME\tRESULT\tCONFIG\tMESSAGE")
	for _, e := range h {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Time.UTC().Format(time.RFC3339), e.Result, status.FormatSource(e.Source, true), oneLine(e.Message))
	}
	return tw.Flush()
}
