// Package snapshot implements `kubectl dkc snapshot`: read a kubelet's
// running config through the apiserver's node proxy and turn it into a
// KubeletConfiguration, as the old workflow did with kubectl proxy, curl and
// jq.
package snapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/pkg/atomicfile"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/lifecycle"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/usage"
	"github.com/kubectl-dkc/dkc/pkg/configz"
	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
)

// FilePrefix starts the name of every file --output-dir writes, followed by
// the node's name, as in the old documented workflow.
const FilePrefix = "kubelet_configz_"

// DefaultConcurrency is how many nodes are read at once by default.
const DefaultConcurrency = 8

// Options holds the flags of `kubectl dkc snapshot`.
type Options struct {
	Nodes       util.NodeSelection
	Output      string
	OutputDir   string
	JQ          string
	Concurrency int

	client kubernetes.Interface
	// fetch returns node's transformed config; Complete sets it.
	fetch func(ctx context.Context, node string) ([]byte, error)
	genericiooptions.IOStreams
}

// NewOptions returns the defaults of `kubectl dkc snapshot`.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{Output: "json", Concurrency: DefaultConcurrency, IOStreams: streams}
}

// NewCmdSnapshot returns the snapshot command.
func NewCmdSnapshot(f genericclioptions.RESTClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(streams)
	cmd := &cobra.Command{
		Use:   "snapshot (NODE... | -l SELECTOR | --all) [-o json|yaml] [--output-dir DIR] [--jq EXPR]",
		Short: "Save a node's running kubelet config as a KubeletConfiguration",
		Long: `Save the running config of one or more kubelets as KubeletConfiguration
documents: GET /api/v1/nodes/NODE/proxy/configz (which needs get on
nodes/proxy), its .kubeletconfig with kind and apiVersion set, as the old
workflow did with curl and jq; --jq applies an expression of your own. Several
nodes go to stdout one after another, or with --output-dir one file each,
DIR/kubelet_configz_NODE. snapshot warns about the weak security settings it
copies. Details: docs/user-guide.md, "1. Take the node's live config".`,
		Example: `  # Save node-1's kubelet config, ready to edit and push
  kubectl dkc snapshot node-1 > kubelet.json

  # One file per worker node: ./configs/kubelet_configz_<node>
  kubectl dkc snapshot -l node-role.kubernetes.io/worker --output-dir configs

  # Every node's maxPods, one line per node in name order
  kubectl dkc snapshot --all --jq .maxPods

  # Leave out fields before editing
  kubectl dkc snapshot node-1 --jq 'del(.staticPodPath)'`,
		ValidArgsFunction: util.CompleteNodeNames(f),
		RunE:              lifecycle.RunE(f, o),
	}
	o.Nodes.AddFlags(cmd)
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output, "Output format. One of: (json, yaml).")
	cmd.Flags().StringVar(&o.OutputDir, "output-dir", "", "Write each node's document to DIR/"+FilePrefix+"NODE instead of stdout, and print the paths.")
	cmd.Flags().StringVar(&o.JQ, "jq", "", "A jq expression applied to each KubeletConfiguration before it is printed; it must yield exactly one value.")
	cmd.Flags().IntVar(&o.Concurrency, "concurrency", o.Concurrency, "How many nodes to read at once.")
	return cmd
}

// Complete compiles --jq and, unless Validate will fail anyway, builds the
// client.
func (o *Options) Complete(f genericclioptions.RESTClientGetter, cmd *cobra.Command, args []string) error {
	o.Nodes.Names = args
	t, err := configz.NewTransformer(o.JQ)
	if err != nil {
		return err
	}
	client, err := util.Client(f)
	if err != nil {
		return err
	}
	o.client = client
	o.fetch = func(ctx context.Context, node string) ([]byte, error) {
		return configz.Snapshot(ctx, client.CoreV1().RESTClient(), t, node)
	}
	return nil
}

// Validate checks the flags.
func (o *Options) Validate() error {
	if err := o.Nodes.Validate(false); err != nil {
		return err
	}
	for _, name := range o.Nodes.Names {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return fmt.Errorf("invalid node name %q: %s", name, strings.Join(errs, ", "))
		}
	}
	switch o.Output {
	case "json", "yaml":
	default:
		return usage.InvalidOutput(o.Output, []string{"json", "yaml"})
	}
	if o.Concurrency < 1 {
		return fmt.Errorf("--concurrency must be at least 1, got %d", o.Concurrency)
	}
	return nil
}

// snapshot is the result for one node.
type snapshot struct {
	node string
	doc  []byte // in the output format
	warn []string
	err  error
}

// Run reads every node and prints or writes the documents.
func (o *Options) Run(ctx context.Context) error {
	nodes := o.Nodes.Names
	if len(nodes) == 0 {
		list, err := o.Nodes.Resolve(ctx, o.client)
		if err != nil {
			return err
		}
		for _, n := range list {
			nodes = append(nodes, n.Name)
		}
	} else {
		nodes = sortedUnique(nodes)
	}
	if len(nodes) == 0 {
		return errors.New("no nodes found")
	}
	if o.OutputDir != "" {
		if err := os.MkdirAll(o.OutputDir, 0o755); err != nil {
			return fmt.Errorf("create --output-dir: %w", err)
		}
	}

	results := make([]snapshot, len(nodes))
	sem := make(chan struct{}, o.Concurrency)
	var wg sync.WaitGroup
	for i, node := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i] = o.take(ctx, node)
		}()
	}
	wg.Wait()

	var errs []error
	for _, r := range results {
		if r.err != nil {
			errs = append(errs, fmt.Errorf("snapshot node %q: %w", r.node, r.err))
			continue
		}
		for _, w := range r.warn {
			fmt.Fprintf(o.ErrOut, "Warning: node/%s: the snapshot copies a weak setting: %s\n", r.node, w)
		}
		if o.OutputDir != "" {
			path := filepath.Join(o.OutputDir, FileName(r.node))
			if err := WriteFileAtomic(path, r.doc); err != nil {
				errs = append(errs, fmt.Errorf("snapshot node %q: %w", r.node, err))
				continue
			}
			fmt.Fprintln(o.Out, path)
			continue
		}
		if _, err := o.Out.Write(o.separator(r.node, len(nodes))); err != nil {
			return err
		}
		if _, err := o.Out.Write(r.doc); err != nil {
			return err
		}
	}
	return utilerrors.NewAggregate(errs)
}

// take reads one node and renders its document.
func (o *Options) take(ctx context.Context, node string) snapshot {
	s := snapshot{node: node}
	doc, err := o.fetch(ctx, node)
	if err != nil {
		s.err = err
		return s
	}
	s.warn = weakSettings(doc)
	s.doc, s.err = Render(doc, o.Output)
	return s
}

// separator is what precedes a node's document on stdout: nothing for JSON
// (a stream, as jq prints it) or a single node, "---" and a comment naming
// the node for YAML.
func (o *Options) separator(node string, nodes int) []byte {
	if o.Output != "yaml" || nodes == 1 {
		return nil
	}
	return []byte("---\n# node/" + node + "\n")
}

// Render turns the JSON document doc (as configz.Transformer prints it)
// into output format "json" or "yaml".
func Render(doc []byte, output string) ([]byte, error) {
	if output != "yaml" {
		return doc, nil
	}
	out, err := yaml.JSONToYAML(doc)
	if err != nil {
		return nil, fmt.Errorf("convert to yaml: %w", err)
	}
	return out, nil
}

// weakSettings lists the weak security settings of doc, when doc (after
// --jq) is still a KubeletConfiguration-shaped object.
func weakSettings(doc []byte) []string {
	if !bytes.HasPrefix(bytes.TrimSpace(doc), []byte("{")) {
		return nil
	}
	var cfg kubeletconfigv1beta1.KubeletConfiguration
	if err := json.Unmarshal(doc, &cfg); err != nil {
		return nil // --jq changed it into something else
	}
	return kubeletconfig.WeakSecurity(&cfg)
}

// FileName is the name of node's file under --output-dir.
func FileName(node string) string {
	return FilePrefix + node
}

// WriteFileAtomic writes data to path (mode 0644 when new) through
// atomicfile.WriteFile, so that path holds either its old content or all of
// data.
func WriteFileAtomic(path string, data []byte) error {
	if err := atomicfile.WriteFile(atomicfile.OS, path, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func sortedUnique(names []string) []string {
	// Deterministic output: always in node name order.
	out := slices.Clone(names)
	slices.Sort(out)
	return slices.Compact(out)
}
