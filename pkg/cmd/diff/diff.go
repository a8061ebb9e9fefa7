// Package diff implements `kubectl dkc diff`: compare two kubelet configs,
// each a file, a node's running config, a ConfigMap or a node's assigned
// ConfigMap, as diff(1) does.
package diff

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/lifecycle"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/usage"
	"github.com/kubectl-dkc/dkc/pkg/configz"
	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// Exit codes, as diff(1) uses them.
const (
	ExitSame    = 0
	ExitDiffer  = 1
	ExitTrouble = 2
)

// Kind is what an input names.
type Kind string

// The kinds of input.
const (
	File      Kind = "file"
	Stdin     Kind = "stdin"
	Node      Kind = "node"
	ConfigMap Kind = "configmap"
	Assigned  Kind = "assigned"
)

// prefixes maps each accepted KIND/ prefix to its kind, but for
// ConfigMaps' (util.IsConfigMapType).
var prefixes = map[string]Kind{
	"node": Node, "nodes": Node, "no": Node,
	"assigned": Assigned,
}

// prefixKind returns the kind a KIND/ prefix names.
func prefixKind(prefix string) (Kind, bool) {
	if util.IsConfigMapType(prefix) {
		return ConfigMap, true
	}
	kind, ok := prefixes[prefix]
	return kind, ok
}

// Source is one parsed input.
type Source struct {
	Kind Kind
	// Path is a file's path.
	Path string
	// Namespace is a ConfigMap's namespace when the input named one.
	Namespace string
	// Name is the node's or the ConfigMap's name.
	Name string
}

// ParseSource parses one input: "-", node/NAME, configmap/NAME,
// configmap/NAMESPACE/NAME, assigned/NODE, or else a file path. A file whose
// path starts with one of these prefixes is named ./PATH.
func ParseSource(arg string) (Source, error) {
	if arg == "" {
		return Source{}, errors.New(`invalid input "": name a file, -, node/NAME, configmap/NAME or assigned/NODE`)
	}
	if arg == "-" {
		return Source{Kind: Stdin}, nil
	}
	prefix, rest, found := strings.Cut(arg, "/")
	kind, known := prefixKind(prefix)
	if !found || !known {
		return Source{Kind: File, Path: arg}, nil
	}
	parts := strings.Split(rest, "/")
	s := Source{Kind: kind}
	switch {
	case len(parts) == 1:
		s.Name = parts[0]
	case len(parts) == 2 && kind == ConfigMap:
		s.Namespace, s.Name = parts[0], parts[1]
		if errs := validation.IsDNS1123Label(s.Namespace); len(errs) > 0 {
			return Source{}, fmt.Errorf("invalid input %q: namespace %q: %s", arg, s.Namespace, strings.Join(errs, ", "))
		}
	case kind == ConfigMap:
		return Source{}, fmt.Errorf("invalid input %q: write configmap/NAME or configmap/NAMESPACE/NAME (or ./%s for a file)", arg, arg)
	default:
		return Source{}, fmt.Errorf("invalid input %q: write %s/NAME (or ./%s for a file)", arg, kind, arg)
	}
	if s.Name == "" {
		return Source{}, fmt.Errorf("invalid input %q: name the %s, as %s/NAME", arg, kindNoun(kind), kind)
	}
	if errs := validation.IsDNS1123Subdomain(s.Name); len(errs) > 0 {
		return Source{}, fmt.Errorf("invalid input %q: %q: %s", arg, s.Name, strings.Join(errs, ", "))
	}
	return s, nil
}

func kindNoun(k Kind) string {
	if k == Assigned {
		return "node"
	}
	return string(k)
}

// Label is how the diff's header names s.
func (s Source) Label() string {
	switch s.Kind {
	case File:
		return s.Path
	case Stdin:
		return "-"
	case ConfigMap:
		if s.Namespace != "" {
			return "configmap/" + s.Namespace + "/" + s.Name
		}
		return "configmap/" + s.Name
	}
	return string(s.Kind) + "/" + s.Name
}

// cluster reports whether reading s needs the cluster.
func (s Source) cluster() bool {
	return s.Kind == Node || s.Kind == ConfigMap || s.Kind == Assigned
}

// Options holds the flags of `kubectl dkc diff`.
type Options struct {
	Args []string
	Key  string
	// DropIn is --drop-in: B is merged over A before they are compared.
	DropIn    bool
	Namespace string

	client kubernetes.Interface
	genericiooptions.IOStreams
}

// NewOptions returns the defaults of `kubectl dkc diff`.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{Key: source.DefaultKey, Namespace: source.DefaultNamespace, IOStreams: streams}
}

// NewCmdDiff returns the diff command.
func NewCmdDiff(f genericclioptions.RESTClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(streams)
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Show how two kubelet configs differ",
		Long: `Show how two kubelet configs differ, as a unified diff from A to B.

A and B are each one of:
  FILE                 a JSON or YAML file (./FILE when it starts with a prefix below)
  -                    stdin (at most one of A and B)
  node/NODE            NODE's running config, read as snapshot reads it
  configmap/NAME       a ConfigMap in the -n namespace, key --key
  configmap/NS/NAME    a ConfigMap in namespace NS
  assigned/NODE        the ConfigMap assigned to NODE, with the assignment's key

--drop-in merges B, a partial config, over A as the kubelet merges a drop-in.
Exit status, as diff(1): 0 the same, 1 different, 2 an error.
Details: docs/user-guide.md, "Compare configs".`,
		Example: `  # What an edited snapshot changes on the node
  kubectl dkc diff node/node-1 kubelet.json

  # What a node would change when it applies its assigned config
  kubectl dkc diff node/node-1 assigned/node-1

  # Two nodes
  kubectl dkc diff node/node-1 node/node-2

  # What a drop-in (a partial config) would change on a node
  kubectl dkc diff node/node-1 max-pods.yaml --drop-in`,
		ValidArgsFunction: completion(f),
	}
	run := lifecycle.RunE(f, o)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return trouble(run(cmd, args))
	}
	cmd.Flags().StringVar(&o.Key, "key", o.Key, "ConfigMap key that holds the config, for configmap/ inputs.")
	cmd.Flags().BoolVar(&o.DropIn, "drop-in", o.DropIn, "B is a drop-in (a partial config): compare A with B merged over A, as the kubelet merges --config-dir files.")
	// A usage error exits 2 too, printed as kubectl prints one.
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return trouble(&usage.Error{CommandPath: c.CommandPath(), Err: err})
	})
	return cmd
}

// trouble makes any error but a difference exit 2, as diff(1).
func trouble(err error) error {
	var exitErr *util.ExitError
	if err == nil || errors.As(err, &exitErr) {
		return err
	}
	return &util.ExitError{Code: ExitTrouble, Err: err}
}

// Complete takes the inputs and, only when one of them is in the cluster,
// builds a client: a diff of two files needs no cluster.
func (o *Options) Complete(f genericclioptions.RESTClientGetter, cmd *cobra.Command, args []string) error {
	o.Args = args
	sources, err := parseSources(args)
	if err != nil || (!sources[0].cluster() && !sources[1].cluster()) {
		return nil // Validate reports a bad input
	}
	ns, err := util.ConfigNamespace(f, cmd)
	if err != nil {
		return err
	}
	o.Namespace = ns
	o.client, err = util.Client(f)
	return err
}

// Validate checks the arguments and flags.
func (o *Options) Validate() error {
	sources, err := parseSources(o.Args)
	if err != nil {
		return err
	}
	if sources[0].Kind == Stdin && sources[1].Kind == Stdin {
		return errors.New("only one of A and B can be - (stdin)")
	}
	if errs := validation.IsConfigMapKey(o.Key); len(errs) > 0 {
		return fmt.Errorf("invalid --key %q: %s", o.Key, strings.Join(errs, ", "))
	}
	return nil
}

// parseSources parses the two inputs A and B.
func parseSources(args []string) ([2]Source, error) {
	var sources [2]Source
	if len(args) != 2 {
		return sources, fmt.Errorf("diff takes two inputs, A and B, got %d: see kubectl dkc diff --help", len(args))
	}
	for i, arg := range args {
		s, err := ParseSource(arg)
		if err != nil {
			return sources, err
		}
		sources[i] = s
	}
	return sources, nil
}

// Run reads both inputs and prints their diff. It returns an ExitError
// with code 1 and no message when they differ.
func (o *Options) Run(ctx context.Context) error {
	sources, err := parseSources(o.Args)
	if err != nil {
		return err
	}
	var docs [2][]byte
	for i, s := range sources {
		if docs[i], err = o.read(ctx, s); err != nil {
			return err
		}
	}
	labels := [2]string{sources[0].Label(), sources[1].Label()}
	a, b, warnings, err := Effective(labels, docs, o.DropIn)
	for _, w := range warnings {
		fmt.Fprintf(o.ErrOut, "Warning: %s\n", w)
	}
	if err != nil {
		return err
	}
	if o.DropIn {
		labels[1] += " over " + labels[0]
	}
	d := kubeletconfig.UnifiedDiff(labels[0], labels[1], a, b)
	if d == "" {
		return nil
	}
	if _, err := io.WriteString(o.Out, d); err != nil {
		return err
	}
	return &util.ExitError{Code: ExitDiffer}
}

// Effective checks that docs, the inputs A and B named by labels, are each
// one KubeletConfiguration, and returns them normalized, to be compared:
// A, and B, or with dropIn B merged over A (an RFC 7386 merge patch, as the
// kubelet merges a --config-dir file over its --config). Unknown fields
// are compared; warnings names each, with its input.
func Effective(labels [2]string, docs [2][]byte, dropIn bool) (a, b []byte, warnings []string, err error) {
	var configs [2][]byte
	for i, doc := range docs {
		j, ws, err := config(doc)
		for _, w := range ws {
			warnings = append(warnings, labels[i]+": "+w)
		}
		if err != nil {
			return nil, nil, warnings, fmt.Errorf("%s: %w", labels[i], err)
		}
		configs[i] = j
	}
	if dropIn {
		merged, err := kubeletconfig.MergePatch(configs[0], configs[1])
		if err != nil {
			return nil, nil, warnings, fmt.Errorf("%s over %s: %w", labels[1], labels[0], err)
		}
		configs[1] = merged
	}
	if a, err = kubeletconfig.Normalize(configs[0]); err != nil {
		return nil, nil, warnings, fmt.Errorf("%s: %w", labels[0], err)
	}
	if b, err = kubeletconfig.Normalize(configs[1]); err != nil {
		return nil, nil, warnings, fmt.Errorf("%s: %w", labels[1], err)
	}
	return a, b, warnings, nil
}

// config checks that doc is one KubeletConfiguration and returns it as
// JSON, nulls kept (a drop-in's null deletes a field), with a warning for
// each unknown field.
func config(doc []byte) ([]byte, []string, error) {
	if err := kubeletconfig.SingleDocument(doc); err != nil {
		var docs *kubeletconfig.DocumentsError
		if errors.As(err, &docs) {
			return nil, nil, fmt.Errorf("%w: diff compares one KubeletConfiguration on each side", err)
		}
		return nil, nil, err
	}
	return kubeletconfig.DecodePartial(doc, kubeletconfig.DecodeOptions{AllowUnknownFields: true})
}

// read returns the document s names.
func (o *Options) read(ctx context.Context, s Source) ([]byte, error) {
	switch s.Kind {
	case File:
		b, err := os.ReadFile(s.Path)
		if err != nil {
			return nil, fmt.Errorf("read %w", err)
		}
		return b, nil
	case Stdin:
		b, err := io.ReadAll(o.In)
		if err != nil {
			return nil, fmt.Errorf("read stdin: %w", err)
		}
		return b, nil
	case Node:
		t, err := configz.NewTransformer("")
		if err != nil {
			return nil, err
		}
		b, err := configz.Snapshot(ctx, o.client.CoreV1().RESTClient(), t, s.Name)
		if err != nil {
			return nil, fmt.Errorf("read node/%s: %w", s.Name, err)
		}
		return b, nil
	case ConfigMap:
		ns := s.Namespace
		if ns == "" {
			ns = o.Namespace
		}
		return readConfigMap(ctx, o.client, ns, s.Name, o.Key, "choose one with --key")
	case Assigned:
		node, err := o.client.CoreV1().Nodes().Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("read assigned/%s: %w", s.Name, err)
		}
		src, _, err := source.Assigned(node)
		if err != nil {
			return nil, fmt.Errorf("read assigned/%s: %w", s.Name, err)
		}
		if src == nil {
			return nil, fmt.Errorf("node %q has no assigned config: it runs its local config; compare node/%s instead", s.Name, s.Name)
		}
		if src.ConfigMap == nil {
			return nil, fmt.Errorf("read assigned/%s: %w", s.Name, source.ErrAllNilSubfields)
		}
		ref := src.ConfigMap
		return readConfigMap(ctx, o.client, ref.Namespace, ref.Name, ref.KubeletConfigKey, "the key is the assignment's kubeletConfigKey")
	}
	return nil, fmt.Errorf("unknown input kind %q", s.Kind)
}

// readConfigMap returns the config under key in ConfigMap namespace/name, as
// source.Payload reads it; keyFrom says how to choose another key, for the
// message when it is missing.
func readConfigMap(ctx context.Context, client kubernetes.Interface, namespace, name, key, keyFrom string) ([]byte, error) {
	cm, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read configmap %q in namespace %q: %w", name, namespace, err)
	}
	data, err := source.Payload(cm, key)
	var missing *source.KeyNotFoundError
	if errors.As(err, &missing) && len(missing.Keys) > 0 {
		return nil, fmt.Errorf("%w; %s", err, keyFrom)
	}
	return data, err
}
