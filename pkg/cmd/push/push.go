// Package push implements `kubectl dkc push`: check a KubeletConfiguration
// and store it in a ConfigMap named after its content, as
// `kubectl create configmap --from-file=kubelet=FILE --append-hash` did in
// the old documented workflow.
package push

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/lifecycle"
	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/pkg/table"
)

// hashSuffixLen is the length of "-" plus the hash --append-hash appends.
const hashSuffixLen = 11

// ErrConflict means a ConfigMap of the same name holds different data.
var ErrConflict = errors.New("configmap already exists with different data")

// Options holds the flags of `kubectl dkc push`.
type Options struct {
	// Filename is FILE, or "-" for stdin.
	Filename           string
	Name               string
	Namespace          string
	Key                string
	AppendHash         bool
	Immutable          bool
	AllowUnknownFields bool
	DryRun             string

	PrintFlags *genericclioptions.PrintFlags

	client kubernetes.Interface
	genericiooptions.IOStreams
}

// NewOptions returns the defaults of `kubectl dkc push`.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{
		Namespace:  source.DefaultNamespace,
		Key:        source.DefaultKey,
		AppendHash: true,
		DryRun:     util.DryRunNone,
		PrintFlags: util.NewPrintFlags(),
		IOStreams:  streams,
	}
}

// NewCmdPush returns the push command.
func NewCmdPush(f genericclioptions.RESTClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(streams)
	cmd := &cobra.Command{
		Use:   "push (FILE | -) --name NAME [--append-hash] [--dry-run=none|client|server]",
		Short: "Check a KubeletConfiguration and store it in a ConfigMap",
		Long: `Check a KubeletConfiguration and store it in a ConfigMap, ready to assign.

push refuses a file that is not one strict KubeletConfiguration, and stores
its bytes unchanged under --key, labelled ` + source.ConfigLabel + `=true. With
--append-hash (the default) the name is NAME-HASH, as kubectl create configmap
--append-hash names it. It prints the sha256 of the bytes, which assign
--digest takes. It warns only about what holds on any node: weak security
settings, and values no node can run. What the config would change on a node,
and the --allow-unsafe that needs: kubectl dkc assign --dry-run=server.
Details: docs/user-guide.md, "3. Put it in a ConfigMap".`,
		Example: `  # Push an edited snapshot; prints configmap/my-node-config-<hash> created, digest sha256:<hex>
  kubectl dkc push kubelet.json --name my-node-config

  # From stdin, straight from a snapshot
  kubectl dkc snapshot node-1 | kubectl dkc push - --name node-1-config

  # Print only the name, for scripts
  CM=$(kubectl dkc push kubelet.yaml --name my-node-config -o name)`,
		ValidArgsFunction: cobra.FixedCompletions(nil, cobra.ShellCompDirectiveDefault),
		RunE:              lifecycle.RunE(f, o),
	}
	cmd.Flags().StringVar(&o.Name, "name", "", "Name of the ConfigMap; --append-hash adds a hash of the content to it.")
	cmd.Flags().StringVar(&o.Key, "key", o.Key, "ConfigMap key that holds the config (the kubeletConfigKey of an assignment).")
	cmd.Flags().BoolVar(&o.AppendHash, "append-hash", o.AppendHash, "Append a hash of the ConfigMap to its name, as kubectl create configmap --append-hash does.")
	cmd.Flags().BoolVar(&o.Immutable, "immutable", false, "Make the ConfigMap immutable. Immutability enters the hash, so the name differs from a mutable push.")
	cmd.Flags().BoolVar(&o.AllowUnknownFields, "allow-unknown-fields", false, "Push a config with fields this version of dkc does not know, with a warning for each.")
	util.AddDryRunFlag(cmd, &o.DryRun, `Must be "none", "server", or "client". If client strategy, only print the ConfigMap that would be created, without contacting the cluster. If server strategy, submit a server-side request without persisting it.`)
	o.PrintFlags.AddFlags(cmd)
	cmd.Flags().Lookup("output").Usage = fmt.Sprintf("Output format. One of: (%s). The default and wide print the config's digest, which assign --digest, rollout start --digest and a pool's spec.digest take.",
		strings.Join(append([]string{outputWide}, o.PrintFlags.AllowedFormats()...), ", "))
	return cmd
}

// Complete takes FILE, the namespace and, unless --dry-run=client, a client.
// A client dry-run never loads a kubeconfig.
func (o *Options) Complete(f genericclioptions.RESTClientGetter, cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		o.Filename = args[0]
	}
	if len(args) > 1 {
		return fmt.Errorf("push takes one FILE argument, got %d: %s", len(args), strings.Join(args, " "))
	}
	ns, err := util.ConfigNamespace(f, cmd)
	if err != nil {
		return err
	}
	o.Namespace = ns
	if o.DryRun == util.DryRunClient {
		return nil
	}
	o.client, err = util.Client(f)
	return err
}

// Validate checks the flags.
func (o *Options) Validate() error {
	if o.Filename == "" {
		return errors.New("no FILE given: name the KubeletConfiguration file, or - to read stdin")
	}
	if o.Name == "" {
		return errors.New("--name is required: name the ConfigMap, e.g. --name my-node-config")
	}
	maxLen := validation.DNS1123SubdomainMaxLength
	if o.AppendHash {
		maxLen -= hashSuffixLen
	}
	if errs := validation.IsDNS1123Subdomain(o.Name); len(errs) > 0 {
		return fmt.Errorf("invalid --name %q: %s", o.Name, strings.Join(errs, ", "))
	}
	if len(o.Name) > maxLen {
		return fmt.Errorf("invalid --name %q: at most %d characters with --append-hash, which adds %d", o.Name, maxLen, hashSuffixLen)
	}
	if errs := validation.IsConfigMapKey(o.Key); len(errs) > 0 {
		return fmt.Errorf("invalid --key %q: %s", o.Key, strings.Join(errs, ", "))
	}
	if err := util.ValidateDryRun(o.DryRun); err != nil {
		return err
	}
	if *o.PrintFlags.OutputFormat == outputWide {
		return nil
	}
	if _, err := util.Printer(o.PrintFlags, outputWide); err != nil {
		return err
	}
	return nil
}

// Run reads, checks and pushes the config.
func (o *Options) Run(ctx context.Context) error {
	data, warnings, err := o.read()
	if err != nil {
		return err
	}
	cm, err := o.configMap(data)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		fmt.Fprintf(o.ErrOut, "Warning: %s: %s\n", o.displayName(), w)
	}
	if o.DryRun == util.DryRunClient {
		return o.print(cm, "created")
	}
	out, op, err := Create(ctx, o.client, cm, o.DryRun == util.DryRunServer)
	if err != nil {
		if errors.Is(err, ErrConflict) {
			return o.conflict(cm.Name, err)
		}
		return err
	}
	util.WarnAllowUnsafeAnnotation(o.ErrOut, out)
	return o.print(out, op)
}

// displayName names the input in messages.
func (o *Options) displayName() string {
	if o.Filename == "-" {
		return "stdin"
	}
	return o.Filename
}

// read reads the input and checks that it is a valid KubeletConfiguration,
// printing warnings for unknown fields when they are allowed. warnings are
// what push can judge of it without a node (Judge).
func (o *Options) read() (data []byte, warnings []string, err error) {
	if o.Filename == "-" {
		data, err = io.ReadAll(o.In)
	} else {
		data, err = os.ReadFile(o.Filename)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", o.displayName(), err)
	}
	if !utf8.Valid(data) {
		return nil, nil, fmt.Errorf("%s: not UTF-8 text: a KubeletConfiguration is JSON or YAML", o.displayName())
	}
	if err := kubeletconfig.SingleDocument(data); err != nil {
		var docs *kubeletconfig.DocumentsError
		if errors.As(err, &docs) {
			return nil, nil, fmt.Errorf("%s: %w: push takes one KubeletConfiguration per ConfigMap; push each document from a file of its own", o.displayName(), err)
		}
		return nil, nil, fmt.Errorf("%s: %w", o.displayName(), err)
	}
	cfg, unknown, err := kubeletconfig.Decode(data, kubeletconfig.DecodeOptions{AllowUnknownFields: o.AllowUnknownFields})
	if err != nil {
		if !o.AllowUnknownFields && strings.Contains(err.Error(), "unknown field ") {
			return nil, nil, fmt.Errorf("%s: %w (fix the field, or use --allow-unknown-fields to push it anyway)", o.displayName(), err)
		}
		return nil, nil, fmt.Errorf("%s: %w", o.displayName(), err)
	}
	for _, w := range unknown {
		fmt.Fprintf(o.ErrOut, "Warning: %s: %s\n", o.displayName(), w)
	}
	if err := kubeletconfig.Validate(cfg); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", o.displayName(), err)
	}
	return data, Judge(data, cfg), nil
}

// Judge returns what push warns about in the config document data (cfg
// decoded): what holds on any node, so needs none to judge. That is each
// weak security setting, and each value that cannot be right on any node
// (kubeletconfig.CheckBounds without a node's facts: the floors, and the
// heartbeat intervals against the default node monitor grace period),
// which every agent refuses. What the config would change on a node, and
// the --allow-unsafe that needs, depends on what the node runs: assign and
// rollout start --dry-run show it.
func Judge(data []byte, cfg *kubeletconfigv1beta1.KubeletConfiguration) []string {
	var warnings []string
	for _, w := range kubeletconfig.WeakSecurityDoc(data, cfg) {
		warnings = append(warnings, "weak security setting: "+w)
	}
	if v := kubeletconfig.CheckBounds(cfg, kubeletconfig.NodeFacts{}); len(v) > 0 {
		warnings = append(warnings, "values that cannot be right on any node, which every agent refuses: "+kubeletconfig.FormatViolations(v))
	}
	return warnings
}

// configMap builds the ConfigMap for data, named as --append-hash says.
func (o *Options) configMap(data []byte) (*corev1.ConfigMap, error) {
	return source.BuildConfigMap(o.Namespace, o.Name, o.Key, data, o.AppendHash, o.Immutable)
}

// Create creates cm and returns the object to print with the operation
// done: "created", or "unchanged" when a ConfigMap of that name already
// holds the same data. Different data is ErrConflict. With dryRun the
// apiserver checks and answers without storing anything.
func Create(ctx context.Context, client kubernetes.Interface, cm *corev1.ConfigMap, dryRun bool) (*corev1.ConfigMap, string, error) {
	opts := metav1.CreateOptions{FieldManager: source.FieldManager}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	created, err := client.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, opts)
	if err == nil {
		return created, "created", nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, "", fmt.Errorf("create configmap %q in namespace %q: %w", cm.Name, cm.Namespace, err)
	}
	existing, gerr := client.CoreV1().ConfigMaps(cm.Namespace).Get(ctx, cm.Name, metav1.GetOptions{})
	if gerr != nil {
		return nil, "", fmt.Errorf("create configmap %q in namespace %q: %w: %w", cm.Name, cm.Namespace, err, gerr)
	}
	if !SameData(existing, cm) {
		return nil, "", fmt.Errorf("configmap %q in namespace %q: %w", cm.Name, cm.Namespace, ErrConflict)
	}
	return existing, "unchanged", nil
}

// SameData reports whether a and b hold the same data and binaryData.
func SameData(a, b *corev1.ConfigMap) bool {
	return maps.Equal(a.Data, b.Data) && len(a.BinaryData) == 0 && len(b.BinaryData) == 0
}

// conflict explains ErrConflict with the fix that fits the flags.
func (o *Options) conflict(name string, err error) error {
	if o.AppendHash {
		return fmt.Errorf("%w, although its name carries the hash of this content: it was changed after it was pushed; delete it, or push under a new --name", err)
	}
	return fmt.Errorf("%w: push under a new --name, or use --append-hash so that each content gets its own name", err)
}

// outputWide is -o wide, which push prints itself: a table of the
// ConfigMap's name, key and digest.
const outputWide = "wide"

// print prints obj with operation op ("created" or "unchanged") and the
// digest of its config, which assign, rollout start and a pool's
// spec.digest take as the reviewed bytes, marked as a dry run as kubectl
// marks it. -o name prints only configmap/NAME, for scripts.
func (o *Options) print(obj *corev1.ConfigMap, op string) error {
	payload, err := source.Payload(obj, o.Key)
	if err != nil {
		return err
	}
	digest := source.Digest(payload)
	if *o.PrintFlags.OutputFormat == outputWide {
		t := table.New("Name", "Key", "Digest", "Result")
		table.AddRow(t, "configmap/"+obj.Name, o.Key, digest, op+util.DryRunSuffix(o.DryRun))
		return table.Print(o.Out, t)
	}
	p, err := util.ToPrinter(o.PrintFlags, o.DryRun, op+", digest "+digest)
	if err != nil {
		return err
	}
	return p.PrintObj(obj, o.Out)
}
