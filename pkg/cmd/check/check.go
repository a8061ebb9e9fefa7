// Package check implements `kubectl dkc check`: whether dkc is installed
// and can work, in the manner of `linkerd check` and `cilium status`. Each
// check is a small function that returns a Result; Run prints them as a
// list (✓, ! or ✗, and a hint) or as JSON, and exits 2 when one failed.
package check

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/lifecycle"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/usage"
	"github.com/kubectl-dkc/dkc/pkg/source"
	dkcstatus "github.com/kubectl-dkc/dkc/pkg/status"
	"github.com/kubectl-dkc/dkc/pkg/version"
)

// Status is a check's outcome.
type Status string

const (
	// OK (✓): as it should be.
	OK Status = "ok"
	// Warn (!): works, but not as documented, or cannot be known.
	Warn Status = "warn"
	// Fail (✗): dkc cannot work as documented; check exits 2.
	Fail Status = "fail"
)

// Result is one check's outcome.
type Result struct {
	Name    string `json:"name"`
	Status  Status `json:"status"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
}

// Report is what -o json prints.
type Report struct {
	Checks []Result `json:"checks"`
}

// The supported versions (docs/install.md, "Versions").
var (
	minAPIServer = utilversion.MajorMinor(1, 30)
	minKubelet   = utilversion.MajorMinor(1, 34)
	maxKubelet   = utilversion.MajorMinor(1, 37)
)

// Policies are the ValidatingAdmissionPolicies of
// deploy/admission-policy.yaml, each with a binding of the same name.
var Policies = []string{
	"kubectl-dkc-node-assignment",
	"kubectl-dkc-agent-own-node",
	"kubectl-dkc-agent-probe-pod",
	"kubectl-dkc-node-opt-in",
	"kubectl-dkc-rollout-opt-in",
	"kubectl-dkc-pool-opt-in",
	"kubectl-dkc-controller-nodes",
	"kubectl-dkc-pool-namespace",
	"kubectl-dkc-startup-taint",
	"kubectl-dkc-controller-leases",
}

// Labels of dkc's workloads in deploy/.
const (
	agentSelector      = "app.kubernetes.io/name=dkc-agent"
	controllerSelector = "app.kubernetes.io/name=dkc-controller"
)

// installHint is how deploy/ is installed.
const installHint = "install dkc: kubectl dkc install --image-repository HOST/PATH (docs/install.md)"

// Options holds the flags and clients of `kubectl dkc check`.
type Options struct {
	Output    string
	Namespace string
	Client    kubernetes.Interface
	Dynamic   dynamic.Interface
	// Version is the CLI's version, which the agents must run.
	Version string
	Now     func() time.Time
	genericiooptions.IOStreams
}

// NewOptions returns the defaults.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{Namespace: source.DefaultNamespace, Version: version.Get().Version, Now: time.Now, IOStreams: streams}
}

// NewCmdCheck returns the check command.
func NewCmdCheck(f genericclioptions.RESTClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(streams)
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check that dkc is installed and can work on every node",
		Long: `Check the cluster for what dkc needs: supported versions, the custom
resources, the controller, one agent per node at this CLI's version, the
admission policies in force (a forged write, sent as a server-side dry-run,
must be refused), the agent's permissions, and per node the kubelet's
version, its drop-in directory and the flags that set config fields (a field
set by a flag cannot change through a config; read from /flagz, which
kubelets serve from 1.36 on).

Each check prints ✓ (as it should be), ! (works, but not as documented, or
cannot be known) or ✗ (dkc cannot work as documented), with a hint. Exits 2
when a check failed.`,
		Example: `  # Check the install
  kubectl dkc check

  # The same as JSON, for scripts
  kubectl dkc check -o json`,
		Args: cobra.NoArgs,
		RunE: lifecycle.RunE(f, o),
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output, "Output format. One of: (json). Default is a list.")
	return cmd
}

// Complete fills in the namespace and the clients.
func (o *Options) Complete(f genericclioptions.RESTClientGetter, cmd *cobra.Command, _ []string) error {
	ns, err := util.ConfigNamespace(f, cmd)
	if err != nil {
		return err
	}
	o.Namespace = ns
	if o.Client, err = util.Client(f); err != nil {
		return err
	}
	cfg, err := f.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	o.Dynamic, err = dynamic.NewForConfig(cfg)
	return err
}

// Validate checks the flags.
func (o *Options) Validate() error {
	switch o.Output {
	case "", "json":
		return nil
	}
	return usage.InvalidOutput(o.Output, []string{"json"})
}

// Run runs every check and prints them; a failed check exits 2. An
// apiserver that does not answer is an error (exit 1), as for every command.
func (o *Options) Run(ctx context.Context) error {
	results, err := o.Checks(ctx)
	if err != nil {
		return err
	}
	if err := print(o.Out, o.Output, results); err != nil {
		return err
	}
	failed := 0
	for _, r := range results {
		if r.Status == Fail {
			failed++
		}
	}
	if failed > 0 {
		return &util.ExitError{Code: dkcstatus.ExitConfigError, Err: fmt.Errorf("%d of %d checks failed", failed, len(results))}
	}
	return nil
}

// Checks runs the checks in their order. It fails only when the
// apiserver does not tell its version.
func (o *Options) Checks(ctx context.Context) ([]Result, error) {
	info, err := o.Client.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("read the apiserver's version: %w", err)
	}
	out := []Result{checkClient(o.Version), judgeAPIServer(info.GitVersion), o.checkCRDs()}
	out = append(out, o.checkController(ctx))
	nodes, err := o.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return append(out, Result{Name: "nodes", Status: Fail, Message: fmt.Sprintf("list nodes: %v", err)}), nil
	}
	agents, err := o.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: agentSelector})
	if err != nil {
		return append(out, Result{Name: "agents", Status: Fail, Message: fmt.Sprintf("list the agents' pods: %v", err)}), nil
	}
	out = append(out, checkAgents(nodes.Items, agents.Items, o.Version, o.Now()))
	out = append(out, o.checkPolicies(ctx), o.checkForgedWrites(ctx, nodes.Items))
	out = append(out, o.checkAgentPermissions(ctx, agents.Items))
	dropin := appliesDropIn(agents.Items)
	for i := range nodes.Items {
		out = append(out, o.checkNode(ctx, &nodes.Items[i], dropin)...)
	}
	return out, nil
}

// checkClient names the CLI's version, which the agents must run.
func checkClient(v string) Result {
	return Result{Name: "client version", Status: OK, Message: "kubectl dkc " + v}
}

// judgeAPIServer holds the apiserver's version to the supported range.
func judgeAPIServer(gitVersion string) Result {
	r := Result{Name: "apiserver version"}
	v, err := utilversion.ParseGeneric(gitVersion)
	switch {
	case err != nil:
		r.Status, r.Message = Warn, fmt.Sprintf("%s: not a version dkc can judge", gitVersion)
	case v.LessThan(minAPIServer):
		r.Status, r.Message = Warn, fmt.Sprintf("%s, older than 1.30: no ValidatingAdmissionPolicy, so nothing keeps a node from reassigning itself", gitVersion)
		r.Hint = "upgrade the apiserver to 1.30 or later (docs/install.md, Versions)"
	default:
		r.Status, r.Message = OK, fmt.Sprintf("%s (supported: 1.30 and later)", gitVersion)
	}
	return r
}

// print writes results as a list, or as JSON.
func print(w io.Writer, output string, results []Result) error {
	if output == "json" {
		b, err := json.MarshalIndent(Report{Checks: results}, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	}
	counts := map[Status]int{}
	for _, r := range results {
		counts[r.Status]++
		fmt.Fprintf(w, "%s %s: %s\n", mark[r.Status], r.Name, r.Message)
		if r.Hint != "" {
			fmt.Fprintf(w, "    hint: %s\n", r.Hint)
		}
	}
	_, err := fmt.Fprintf(w, "\n%d checks: %d ok, %d warnings, %d failed\n", len(results), counts[OK], counts[Warn], counts[Fail])
	return err
}

var mark = map[Status]string{OK: "✓", Warn: "!", Fail: "✗"}
