package rollout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/lifecycle"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/pkg/table"
)

// DefaultTimeout is how long --wait waits by default. The rollout's own
// defaults are pkg/rollout's, which pools share.
const DefaultTimeout = 30 * time.Minute

// StartOptions holds the flags of `kubectl dkc rollout start`.
type StartOptions struct {
	Nodes          util.NodeSelection
	Config         string
	Namespace      string
	Key            string
	ToLocal        bool
	Name           string
	MaxUnavailable string
	Canary         int
	Soak           time.Duration
	OrderByLabel   string
	// AllowUnsafe is --allow-unsafe: the safety classes the pin allows.
	AllowUnsafe string
	// Digest is --digest: the sha256 the bytes must have, as reviewed.
	Digest        string
	Drain         bool
	DrainTimeout  time.Duration
	DrainForce    bool
	DrainEmptyDir bool
	DryRun        string
	Wait          bool
	Timeout       time.Duration
	// TimeoutSet is whether --timeout was given.
	TimeoutSet bool

	// Windows is --window: the maintenance windows in which nodes start,
	// each in the form rollout.WindowForm.
	Windows []string
	// PauseOnAlert is --pause-on-alert: the Alertmanager whose alerts
	// hold the rollout, and the matchers of those alerts, in the form
	// rollout.PauseOnAlertForm.
	PauseOnAlert string

	PrintFlags *genericclioptions.PrintFlags
	Printer    printers.ResourcePrinter
	Client     kubernetes.Interface
	// Kubelets reads kubelets through the node proxy (newKubeletReader);
	// Client when nil.
	Kubelets kubernetes.Interface
	Store    *rollout.Store
	genericiooptions.IOStreams
}

// NewStartOptions returns StartOptions with the defaults.
func NewStartOptions(streams genericiooptions.IOStreams) *StartOptions {
	return &StartOptions{
		Namespace:      source.DefaultNamespace,
		Key:            source.DefaultKey,
		MaxUnavailable: strconv.Itoa(rollout.DefaultMaxUnavailable),
		Canary:         rollout.DefaultCanary,
		DrainTimeout:   rollout.DefaultDrainTimeout,
		DryRun:         util.DryRunNone,
		Timeout:        DefaultTimeout,
		PrintFlags:     util.NewPrintFlags(),
		IOStreams:      streams,
	}
}

// NewCmdStart returns the rollout start command.
func NewCmdStart(f genericclioptions.RESTClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewStartOptions(streams)
	cmd := &cobra.Command{
		Use:   "start (NODE... | -l SELECTOR | --all) (--config [configmap/]NAME | --to-local)",
		Short: "Roll a kubelet config out over nodes: a canary, then waves under a budget",
		Long: `Roll a kubelet config out over nodes: --canary nodes first, then the rest,
never more than --max-unavailable down at once, halting on a node's error.
--dry-run prints the waves and each node's --allow-unsafe (docs/rollout.md).`,
		Example: `  # Every node: one canary, then one node at a time; follow it here
  kubectl dkc rollout start --config my-node-config-5fd8t4bhgb --all --wait`,
		ValidArgsFunction: util.CompleteNodeNames(f),
		RunE:              lifecycle.RunE(f, o),
	}
	o.Nodes.AddFlags(cmd)
	o.PrintFlags.AddFlags(cmd)
	fl := cmd.Flags()
	fl.StringVar(&o.Config, "config", o.Config, "The ConfigMap that holds the kubelet config: NAME or configmap/NAME, as kubectl dkc push -o name prints it.")
	fl.StringVar(&o.Key, "key", o.Key, "Key of the kubelet config in the ConfigMap (kubeletConfigKey).")
	fl.BoolVar(&o.ToLocal, "to-local", o.ToLocal, "Send the nodes back to their local config instead of --config.")
	fl.StringVar(&o.Name, "name", o.Name, "Name of the rollout; default: the config's name and a random suffix.")
	fl.StringVar(&o.MaxUnavailable, "max-unavailable", o.MaxUnavailable, "Most nodes restarting, in their health gate, NotReady or cordoned at once: a count or a percentage (10%).")
	fl.IntVar(&o.Canary, "canary", o.Canary, "How many nodes go first, alone; the rest waits until they run the config and are Ready.")
	fl.DurationVar(&o.Soak, "soak", o.Soak, "How long a finished wave must stay healthy before the next one starts. 0: no waves after the canary; a freed slot goes at once to the next node.")
	fl.StringVar(&o.OrderByLabel, "order-by-label", o.OrderByLabel, "Take nodes in the order of this label's value (nodes without it last), then by name.")
	util.AddAllowUnsafeFlag(cmd, &o.AllowUnsafe)
	util.AddDigestFlag(cmd, &o.Digest)
	fl.BoolVar(&o.Drain, "drain", o.Drain, "Cordon and drain the nodes where the config changes a resource manager policy, and uncordon them after their health gate.")
	fl.DurationVar(&o.DrainTimeout, "drain-timeout", o.DrainTimeout, "How long to wait for one node's pods to be evicted; 0 means forever.")
	fl.BoolVar(&o.DrainForce, "drain-force", o.DrainForce, "Also evict pods that no controller manages, as kubectl drain --force.")
	fl.BoolVar(&o.DrainEmptyDir, "drain-delete-emptydir-data", o.DrainEmptyDir, "Also evict pods with emptyDir volumes, whose data is lost, as kubectl drain --delete-emptydir-data.")
	fl.StringArrayVar(&o.Windows, "window", o.Windows, "A maintenance window in which nodes start, repeatable: 'DAYS HH:MM DURATION [TIME-ZONE]', e.g. 'Mon-Fri 22:00 4h Europe/Berlin'. Outside every window no node starts; nodes already started finish.")
	fl.StringVar(&o.PauseOnAlert, "pause-on-alert", o.PauseOnAlert, "'URL [MATCHERS]': an Alertmanager and, in its syntax, the alerts that hold the rollout, e.g. 'http://alertmanager.monitoring:9093 severity=critical,team=~db|storage' (none: every alert). While one fires, or the Alertmanager does not answer, no node starts; nodes already started finish. The controller asks only those of its --alertmanager-url.")
	util.AddDryRunFlag(cmd, &o.DryRun, `Must be "none", "client", or "server". With client, print the planned waves; with server, also have the apiserver check the rollout object, without storing it.`)
	fl.BoolVar(&o.Wait, "wait", o.Wait, "Wait until the rollout is done, halted or the timeout passed, and show its progress; without a controller, drive it from here.")
	fl.DurationVar(&o.Timeout, "timeout", o.Timeout, "How long --wait waits; 0 means forever.")
	_ = cmd.RegisterFlagCompletionFunc("config", util.CompleteConfigNames(f))
	return cmd
}

// Complete fills in the nodes, the ConfigMap's name (--config may be
// configmap/NAME: Validate reports one that is not a ConfigMap), the
// namespace, the client and the printer.
func (o *StartOptions) Complete(f genericclioptions.RESTClientGetter, cmd *cobra.Command, args []string) error {
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
	if o.Printer, err = util.ToPrinter(o.PrintFlags, o.DryRun, "started"); err != nil {
		return err
	}
	if o.Client, o.Store, err = newClients(f, o.Namespace); err != nil {
		return err
	}
	o.Kubelets, err = newKubeletReader(f)
	return err
}

// kubelets is the client that reads kubelets.
func (o *StartOptions) kubelets() kubernetes.Interface {
	if o.Kubelets != nil {
		return o.Kubelets
	}
	return o.Client
}

// Validate checks the flags.
func (o *StartOptions) Validate() error {
	if err := o.Nodes.Validate(false); err != nil {
		return err
	}
	switch {
	case o.Config == "" && !o.ToLocal:
		return errors.New("--config is required: name the ConfigMap that holds the kubelet config (kubectl dkc push prints it), or use --to-local")
	case o.Config != "" && o.ToLocal:
		return errors.New("--config and --to-local exclude each other: roll out a config, or go back to local")
	case o.AllowUnsafe != "" && o.ToLocal:
		return errors.New("--allow-unsafe cannot be used with --to-local: a node's local config is not checked by its agent")
	case o.Digest != "" && o.ToLocal:
		return errors.New("--digest cannot be used with --to-local: a node's local config has no bytes in a ConfigMap to check")
	}
	if _, err := util.ParseAllowUnsafe(o.AllowUnsafe); err != nil {
		return err
	}
	if err := util.ValidateDigest(o.Digest); err != nil {
		return err
	}
	if _, err := util.ConfigMapName(o.Config); err != nil {
		return fmt.Errorf("invalid --config %q: %w", o.Config, err)
	}
	if msgs := validation.IsConfigMapKey(o.Key); len(msgs) > 0 {
		return fmt.Errorf("invalid --key %q: %s", o.Key, strings.Join(msgs, ", "))
	}
	if o.Name != "" {
		if msgs := validation.IsDNS1123Subdomain(o.Name); len(msgs) > 0 {
			return fmt.Errorf("invalid --name %q: %s", o.Name, strings.Join(msgs, ", "))
		}
	}
	if _, err := rollout.ParseMaxUnavailable(o.MaxUnavailable); err != nil {
		return err
	}
	if o.Canary < 0 {
		return fmt.Errorf("invalid --canary %d: must not be negative (0 means no canary)", o.Canary)
	}
	if o.Soak < 0 || o.Timeout < 0 || o.DrainTimeout < 0 {
		return errors.New("--soak, --timeout and --drain-timeout must not be negative")
	}
	if _, err := o.windows(); err != nil {
		return err
	}
	if _, err := o.pauseOnAlerts(); err != nil {
		return err
	}
	if err := util.ValidateDryRun(o.DryRun); err != nil {
		return err
	}
	if o.Wait && o.DryRun != util.DryRunNone {
		return errors.New("--wait cannot be used with --dry-run: nothing would change to wait for")
	}
	if o.TimeoutSet && !o.Wait {
		return util.ErrTimeoutWithoutWait
	}
	if !o.Drain && (o.DrainForce || o.DrainEmptyDir) {
		return errors.New("--drain-force and --drain-delete-emptydir-data need --drain")
	}
	return nil
}

// target is the config the flags roll out; nil for --to-local.
func (o *StartOptions) target() *corev1.NodeConfigSource {
	if o.ToLocal {
		return nil
	}
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: o.Namespace, Name: o.Config, KubeletConfigKey: o.Key,
	}}
}

// Run plans the rollout, checks the caller's right to the classes it allows
// and to its drains, and creates it; with --wait it follows it, or drives it
// when no controller does.
func (o *StartOptions) Run(ctx context.Context) error {
	lead := ""
	if o.DryRun == util.DryRunNone {
		var err error
		if lead, err = leader(ctx, o.Client, o.Namespace); err != nil {
			return err
		}
		if lead == "" && !o.Wait {
			return errNoController(o.Namespace)
		}
	}
	target := o.target()
	allow, err := util.ParseAllowUnsafe(o.AllowUnsafe)
	if err != nil {
		return err
	}
	var payload []byte
	if target != nil {
		if _, payload, err = util.AssignableConfigMap(ctx, o.Client, o.Namespace, o.Config, o.Key, o.Digest, o.ErrOut); err != nil {
			return err
		}
	}
	nodes, err := o.Nodes.Resolve(ctx, o.Client)
	if err != nil {
		return err
	}
	if target != nil && o.DryRun != util.DryRunNone {
		util.ReportOptIns(ctx, o.kubelets(), nodes, payload, allow, o.ErrOut)
	}
	store := o.Store
	others, err := store.List(ctx)
	if err != nil {
		return err
	}
	facts, err := factsReader(o.kubelets(), o.ErrOut).Read(ctx, nodes, payload, nil)
	if err != nil {
		return err
	}
	facts.Rollouts = others
	r, warnings, err := rollout.Plan(o.request(allow), facts)
	printWarnings(o.ErrOut, warnings)
	if err != nil {
		return err
	}
	if o.DryRun != util.DryRunClient {
		if err := util.CheckAuthority(ctx, o.Client, allow, rollout.Drains(r)); err != nil {
			return fmt.Errorf("start rollout %q: %w", r.Name, err)
		}
	}
	switch o.DryRun {
	case util.DryRunClient:
		return o.printPlan(r, nodes)
	case util.DryRunServer:
		created, err := store.Create(ctx, r, true)
		if err != nil {
			return err
		}
		return o.printPlan(created, nodes)
	}
	created, err := store.Create(ctx, r, false)
	if err != nil {
		return err
	}
	if err := o.Printer.PrintObj(created, o.Out); err != nil {
		return err
	}
	if !o.Wait {
		fmt.Fprintf(o.ErrOut, "The controller %s drives rollout/%s; follow it with kubectl dkc rollout status %s -w\n", lead, created.Name, created.Name)
		return nil
	}
	return follow(ctx, o.Client, store, lead, created.Name, o.Timeout, o.IOStreams)
}

// request is the rollout the flags ask for, with the classes allow.
func (o *StartOptions) request(allow []string) rollout.Request {
	maxUnavailable, _ := rollout.ParseMaxUnavailable(o.MaxUnavailable)
	windows, _ := o.windows()
	alerts, _ := o.pauseOnAlerts()
	return rollout.Request{
		Namespace:               o.Namespace,
		Name:                    o.Name,
		Suffix:                  utilrand.String(5),
		Config:                  o.target(),
		AllowUnsafe:             allow,
		Selector:                o.Nodes.Selector,
		BySelector:              len(o.Nodes.Names) == 0,
		MaxUnavailable:          &maxUnavailable,
		Canary:                  &o.Canary,
		Soak:                    o.Soak,
		OrderByLabel:            o.OrderByLabel,
		Drain:                   o.Drain,
		DrainTimeout:            &o.DrainTimeout,
		DrainForce:              o.DrainForce,
		DrainDeleteEmptyDirData: o.DrainEmptyDir,
		Windows:                 windows,
		PauseOnAlerts:           alerts,
	}
}

// pauseOnAlerts parses --pause-on-alert.
func (o *StartOptions) pauseOnAlerts() (*rollout.PauseOnAlerts, error) {
	if o.PauseOnAlert == "" {
		return nil, nil
	}
	p, err := rollout.ParsePauseOnAlert(o.PauseOnAlert)
	if err != nil {
		return nil, fmt.Errorf("invalid --pause-on-alert: %w", err)
	}
	return p, nil
}

// windows parses --window.
func (o *StartOptions) windows() (rollout.Windows, error) {
	var ws rollout.Windows
	for _, s := range o.Windows {
		w, err := rollout.ParseWindow(s)
		if err != nil {
			return nil, fmt.Errorf("invalid --window: %w", err)
		}
		ws = append(ws, w)
	}
	return ws, nil
}

// factsReader reads what the nodes run for rollout.Plan, /configz
// included, warning on errOut about what it cannot.
func factsReader(client kubernetes.Interface, errOut io.Writer) *rollout.FactsReader {
	return &rollout.FactsReader{Client: client, Kubelets: true, Warn: func(format string, args ...any) {
		fmt.Fprintf(errOut, "Warning: "+format+"\n", args...)
	}}
}

// printWarnings prints rollout.Plan's warnings on errOut.
func printWarnings(errOut io.Writer, warnings []string) {
	for _, w := range warnings {
		fmt.Fprintf(errOut, "Warning: %s\n", w)
	}
}

// printPlan prints the waves of a rollout that was not created, over
// nodes, or the object with -o.
func (o *StartOptions) printPlan(r *rollout.Rollout, nodes []corev1.Node) error {
	if *o.PrintFlags.OutputFormat != "" {
		return o.Printer.PrintObj(r, o.Out)
	}
	r, err := rollout.Resolve(r, source.NodePointers(nodes), nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "rollout/%s%s: %s\n", r.Name, util.DryRunSuffix(o.DryRun), rollout.Headline(r))
	columns := []string{"Wave", "Nodes"}
	if len(r.Spec.Drain) > 0 {
		columns = append(columns, "Drain")
	}
	t := table.New(columns...)
	for _, w := range rollout.Waves(&r.Spec) {
		row := []any{w.Label(), strings.Join(w.Nodes, ",")}
		if len(r.Spec.Drain) > 0 {
			var drained []string
			for _, n := range w.Nodes {
				if slices.Contains(r.Spec.Drain, n) {
					drained = append(drained, n)
				}
			}
			row = append(row, strings.Join(drained, ","))
		}
		table.AddRow(t, row...)
	}
	return table.Print(o.Out, t)
}
