// Package assign implements `kubectl dkc assign`: point nodes at a kubelet
// config in a ConfigMap, through whichever carrier the apiserver keeps.
package assign

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/lifecycle"
	"github.com/kubectl-dkc/dkc/pkg/flagz"
	"github.com/kubectl-dkc/dkc/pkg/kubeclient/adapt"
	"github.com/kubectl-dkc/dkc/pkg/source"
	dkcstatus "github.com/kubectl-dkc/dkc/pkg/status"
)

// DefaultTimeout bounds --wait.
const DefaultTimeout = 5 * time.Minute

// Options holds the flags of `kubectl dkc assign`.
type Options struct {
	Nodes     util.NodeSelection
	Config    string
	Namespace string
	Key       string
	Carrier   string
	// AllowUnsafe is --allow-unsafe: the safety classes the pin allows.
	AllowUnsafe string
	// Digest is --digest: the sha256 the bytes must have, as reviewed.
	Digest  string
	DryRun  string
	Wait    bool
	Timeout time.Duration
	// TimeoutSet is whether --timeout was given.
	TimeoutSet bool

	PrintFlags *genericclioptions.PrintFlags

	Client kubernetes.Interface
	genericiooptions.IOStreams
}

// NewAssignOptions returns Options with the defaults.
func NewAssignOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{
		Namespace:  source.DefaultNamespace,
		Key:        source.DefaultKey,
		Carrier:    string(source.Auto),
		DryRun:     util.DryRunNone,
		Timeout:    DefaultTimeout,
		PrintFlags: util.NewPrintFlags(),
		IOStreams:  streams,
	}
}

// NewCmdAssign returns the assign command.
func NewCmdAssign(f genericclioptions.RESTClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewAssignOptions(streams)
	cmd := &cobra.Command{
		Use:   "assign (NODE... | -l SELECTOR | --all) --config [configmap/]NAME",
		Short: "Assign a kubelet config in a ConfigMap to nodes",
		Long: `Assign a kubelet config in a ConfigMap to nodes, as patching spec.configSource
did; the dkc agent on each node applies it, and --wait waits until it runs.
The assignment pins the ConfigMap's bytes (--digest: the bytes a reviewer
saw) and the unsafe classes --allow-unsafe allows: the agent refuses a change
in any other class that needs an opt-in. --dry-run names, per node, the
classes the config changes there (against its kubelet's /configz) and the
exact --allow-unsafe it needs. Every selected kubelet restarts at once: for
many nodes, use rollout start. Carriers, permissions, output and exit codes:
docs/user-guide.md, "4. Point the node at it".`,
		Example: `  # Assign a pushed config to one node and wait until it runs it
  kubectl dkc assign node-1 --config my-node-config-5fd8t4bhgb --wait

  # What it would change on each node, and the --allow-unsafe that needs
  kubectl dkc assign -l pool=canary --config my-node-config-5fd8t4bhgb --dry-run=server`,
		ValidArgsFunction: util.CompleteNodeNames(f),
		RunE:              lifecycle.RunE(f, o),
	}
	o.Nodes.AddFlags(cmd)
	cmd.Flags().StringVar(&o.Config, "config", o.Config, "The ConfigMap that holds the kubelet config: NAME or configmap/NAME, as kubectl dkc push -o name prints it (required).")
	cmd.Flags().StringVar(&o.Key, "key", o.Key, "Key of the kubelet config in the ConfigMap (kubeletConfigKey).")
	util.AddAllowUnsafeFlag(cmd, &o.AllowUnsafe)
	util.AddDigestFlag(cmd, &o.Digest)
	cmd.Flags().StringVar(&o.Carrier, "carrier", o.Carrier, "Where to store the assignment: auto (detect per node), native (spec.configSource) or annotation.")
	util.AddDryRunFlag(cmd, &o.DryRun, `Must be "none", "client", or "server". With client, only print what would be assigned, sending nothing (the carrier is assumed, see --carrier); with server, send the patches as server-side dry-runs.`)
	cmd.Flags().BoolVar(&o.Wait, "wait", o.Wait, "Wait until every node runs the assigned config, or reports an error for it.")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "How long --wait waits; 0 means forever.")
	o.PrintFlags.AddFlags(cmd)
	_ = cmd.RegisterFlagCompletionFunc("config", util.CompleteConfigNames(f))
	_ = cmd.RegisterFlagCompletionFunc("carrier", cobra.FixedCompletions([]string{"auto", "native", "annotation"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// Complete fills in the nodes, the ConfigMap's name (--config may be
// configmap/NAME: Validate reports one that is not a ConfigMap), the
// namespace and the client.
func (o *Options) Complete(f genericclioptions.RESTClientGetter, cmd *cobra.Command, args []string) error {
	o.Nodes.Names = args
	if name, err := util.ConfigMapName(o.Config); err == nil {
		o.Config = name
	}
	o.TimeoutSet = cmd.Flags().Changed("timeout")
	ns, err := util.ConfigNamespace(f, cmd)
	if err != nil {
		return err
	}
	o.Namespace = ns
	o.Client, err = util.Client(f)
	return err
}

// Validate checks the flags.
func (o *Options) Validate() error {
	if err := o.Nodes.Validate(false); err != nil {
		return err
	}
	if o.Config == "" {
		return errors.New("--config is required: name the ConfigMap that holds the kubelet config (kubectl dkc push prints it)")
	}
	if _, err := util.ConfigMapName(o.Config); err != nil {
		return fmt.Errorf("invalid --config %q: %w", o.Config, err)
	}
	if msgs := validation.IsConfigMapKey(o.Key); len(msgs) > 0 {
		return fmt.Errorf("invalid --key %q: %s", o.Key, strings.Join(msgs, ", "))
	}
	if _, err := source.ParseCarrier(o.Carrier); err != nil {
		return err
	}
	if _, err := util.ParseAllowUnsafe(o.AllowUnsafe); err != nil {
		return err
	}
	if err := util.ValidateDigest(o.Digest); err != nil {
		return err
	}
	if err := util.ValidateDryRun(o.DryRun); err != nil {
		return err
	}
	if o.Wait && o.DryRun != util.DryRunNone {
		return errors.New("--wait cannot be used with --dry-run: nothing would change to wait for")
	}
	if o.Timeout < 0 {
		return fmt.Errorf("invalid --timeout %s: must not be negative (0 means forever)", o.Timeout)
	}
	if o.TimeoutSet && !o.Wait {
		return util.ErrTimeoutWithoutWait
	}
	if _, err := util.Printer(o.PrintFlags); err != nil {
		return err
	}
	return nil
}

// Source is the assignment the flags describe.
func (o *Options) Source() *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace:        o.Namespace,
		Name:             o.Config,
		KubeletConfigKey: o.Key,
	}}
}

// Run checks the ConfigMap and the caller's right to the classes it
// allows, assigns it to every selected node, and waits when asked to.
func (o *Options) Run(ctx context.Context) error {
	_, payload, err := util.AssignableConfigMap(ctx, o.Client, o.Namespace, o.Config, o.Key, o.Digest, o.ErrOut)
	if err != nil {
		return err
	}
	allow, _ := util.ParseAllowUnsafe(o.AllowUnsafe) // Validate checked it
	if o.DryRun != util.DryRunClient {
		if err := util.CheckAuthority(ctx, o.Client, allow, false); err != nil {
			return fmt.Errorf("assign configmap %q: %w", o.Namespace+"/"+o.Config, err)
		}
	}
	nodes, err := o.Nodes.Resolve(ctx, o.Client)
	if err != nil {
		return err
	}
	if err := flagz.CheckNodes(ctx, o.Client.CoreV1().RESTClient(), nodes, payload); err != nil {
		return fmt.Errorf("assign configmap %q: %w", o.Namespace+"/"+o.Config, err)
	}
	src := o.Source()
	pin := source.NewPin(src, payload, allow)
	if o.DryRun != util.DryRunNone {
		util.ReportOptIns(ctx, o.Client, nodes, payload, allow, o.ErrOut)
	}
	o.warnRestarts(nodes, src)
	now := time.Now()
	var errs []error
	var names []string
	notes := sets.New[string]()
	for i := range nodes {
		if dkcstatus.Agent(&nodes[i], now) == dkcstatus.AgentNone {
			fmt.Fprintf(o.ErrOut, "Warning: node/%s: no dkc agent has reported on this node yet; unless one runs there, nothing will apply the assignment (%s)\n", nodes[i].Name, dkcstatus.InstallHint)
		}
		note, err := o.assign(ctx, &nodes[i], src, pin)
		if note != "" && !notes.Has(note) {
			notes.Insert(note)
			fmt.Fprintf(o.ErrOut, "Warning: %s\n", note)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		names = append(names, nodes[i].Name)
	}
	if err := utilerrors.NewAggregate(errs); err != nil {
		return err
	}
	if !o.Wait {
		return nil
	}
	return o.wait(ctx, names)
}

// warnRestarts warns when more than one node changes its assignment: their
// kubelets restart at once.
func (o *Options) warnRestarts(nodes []corev1.Node, src *corev1.NodeConfigSource) {
	changing := 0
	for i := range nodes {
		if cur, _, err := source.Assigned(&nodes[i]); err != nil || !source.Equal(cur, src) {
			changing++
		}
	}
	if changing > 1 {
		fmt.Fprintf(o.ErrOut, "Warning: %d nodes get the new config at once, and their kubelets all restart at the same time; to restart a few at a time, use kubectl dkc rollout start --config %s\n", changing, o.Config)
	}
}

// assign assigns src to node through the carrier the flags ask for, and
// prints the result. note, when not empty, says what a client dry run
// assumed instead of asking the apiserver.
func (o *Options) assign(ctx context.Context, node *corev1.Node, src *corev1.NodeConfigSource, pin *source.Pin) (note string, err error) {
	carrier, note, err := o.carrier(ctx, node)
	if err != nil {
		return note, err
	}
	patch, err := source.AssignPatch(carrier, src, pin)
	if err != nil {
		return note, fmt.Errorf("assign node %q: %w", node.Name, err)
	}
	var got *corev1.Node
	if o.DryRun == util.DryRunClient {
		// Nothing is sent: the patch is applied to the node as read.
		if got, err = source.PatchedNode(node, patch); err != nil {
			return note, fmt.Errorf("assign node %q: %w", node.Name, err)
		}
	} else {
		opts := metav1.PatchOptions{FieldManager: source.FieldManager}
		if o.DryRun == util.DryRunServer {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		if got, err = o.Client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, opts); err != nil {
			return note, fmt.Errorf("assign node %q: %w", node.Name, err)
		}
		if carrier == source.Native && !source.Equal(got.Spec.ConfigSource, src) {
			return note, droppedError(node.Name)
		}
	}
	p, err := util.ToPrinter(o.PrintFlags, o.DryRun, fmt.Sprintf("assigned %s/%s (%s)", src.ConfigMap.Namespace, src.ConfigMap.Name, carrier))
	if err != nil {
		return note, err
	}
	return note, p.PrintObj(got, o.Out)
}

// ClientDryRunNote says which carrier a client dry run assumed for a node
// without spec.configSource.
const ClientDryRunNote = "assuming the annotation carrier: a client dry run sends nothing to the apiserver, not even the server-side dry-run that detects the carrier; pass --carrier to choose, or use --dry-run=server"

// NativeClientDryRunNote says that a client dry run did not check
// --carrier=native.
const NativeClientDryRunNote = "--carrier=native is not checked: a client dry run sends nothing to the apiserver, which may drop spec.configSource (apiservers 1.26 and later do); use --dry-run=server to check"

// carrier resolves --carrier for node. An explicit native is checked with a
// dry-run first, so that a server that drops spec.configSource fails before
// anything is written (a native patch also clears the annotation). A client
// dry run sends nothing, not even that dry-run: it takes native for a node
// that already holds spec.configSource (every apiserver keeps the field on
// a Node that has it), else annotation, and says so in note.
func (o *Options) carrier(ctx context.Context, node *corev1.Node) (c source.Carrier, note string, err error) {
	c, err = source.ParseCarrier(o.Carrier)
	if err != nil {
		return "", "", err
	}
	if o.DryRun == util.DryRunClient {
		switch {
		case c == source.Native:
			return c, NativeClientDryRunNote, nil
		case c == source.Auto && node.Spec.ConfigSource != nil:
			return source.Native, "", nil
		case c == source.Auto:
			return source.Annotation, ClientDryRunNote, nil
		}
		return c, "", nil
	}
	if c == source.Annotation {
		return c, "", nil
	}
	detected, err := source.Detect(ctx, o.Client.CoreV1().Nodes(), node.Name)
	if err != nil {
		return "", "", err
	}
	if c == source.Native && detected != source.Native {
		return "", "", droppedError(node.Name)
	}
	return detected, "", nil
}

// droppedError says that the apiserver drops the native field.
func droppedError(node string) error {
	return fmt.Errorf("assign node %q: the apiserver dropped spec.configSource (apiservers 1.26 and later drop it silently): use --carrier=annotation, or --carrier=auto", node)
}

// wait waits until every node in names runs the assignment.
func (o *Options) wait(ctx context.Context, names []string) error {
	reported := map[string]bool{}
	_, err := dkcstatus.Wait(ctx, adapt.Clientset(o.Client), names, dkcstatus.WaitActive, o.Timeout, func(changed []dkcstatus.NodeConfig) {
		for _, item := range changed {
			if done, _ := dkcstatus.Reached(item, dkcstatus.WaitActive); done && !reported[item.Name] {
				reported[item.Name] = true
				fmt.Fprintf(o.ErrOut, "node/%s runs %s\n", item.Name, dkcstatus.FormatSource(item.ConfigSource, false))
			}
		}
	})
	if err != nil {
		return &util.ExitError{Code: dkcstatus.ExitCode(err), Err: err}
	}
	return nil
}
