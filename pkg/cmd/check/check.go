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
	"strings"
	"time"

	"github.com/spf13/cobra"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/lifecycle"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/usage"
	"github.com/kubectl-dkc/dkc/pkg/controller"
	"github.com/kubectl-dkc/dkc/pkg/nodehealth"
	"github.com/kubectl-dkc/dkc/pkg/pool"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
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
}

// Labels of dkc's workloads in deploy/.
const (
	agentSelector      = "app.kubernetes.io/name=dkc-agent"
	controllerSelector = "app.kubernetes.io/name=dkc-controller"
)

// installHint is how deploy/ is installed.
const installHint = "install dkc: kubectl apply --server-side -k deploy/ (docs/install.md)"

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

// checkCRDs checks that the apiserver serves dkc's custom resources.
func (o *Options) checkCRDs() Result {
	r := Result{Name: "custom resources"}
	gv := rollout.Resource.GroupVersion().String()
	list, err := o.Client.Discovery().ServerResourcesForGroupVersion(gv)
	if err != nil && !apierrors.IsNotFound(err) {
		r.Status, r.Message = Fail, fmt.Sprintf("discover %s: %v", gv, err)
		return r
	}
	served := map[string]bool{}
	if list != nil {
		for _, res := range list.APIResources {
			served[res.Name] = true
		}
	}
	var missing []string
	for _, res := range []string{rollout.Resource.Resource, pool.Resource.Resource} {
		if !served[res] {
			missing = append(missing, res+"."+rollout.Resource.Group)
		}
	}
	if len(missing) > 0 {
		r.Status, r.Message, r.Hint = Fail, "not served: "+strings.Join(missing, ", "), installHint
		return r
	}
	r.Status, r.Message = OK, fmt.Sprintf("%s and %s served (%s)", rollout.Resource.Resource, pool.Resource.Resource, gv)
	return r
}

// checkController checks that a controller holds a fresh Lease and that
// its pods are Ready. Without any controller the CLI drives rollouts with
// --wait, and pools are not driven: a warning.
func (o *Options) checkController(ctx context.Context) Result {
	r := Result{Name: "controller"}
	lead, err := controller.Leader(ctx, o.Client, o.Namespace, o.Now())
	if err != nil {
		r.Status, r.Message = Fail, err.Error()
		return r
	}
	pods, err := o.Client.CoreV1().Pods(o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: controllerSelector})
	if err != nil {
		r.Status, r.Message = Fail, fmt.Sprintf("list the controller's pods: %v", err)
		return r
	}
	ready := 0
	for i := range pods.Items {
		if nodehealth.PodReady(&pods.Items[i]) {
			ready++
		}
	}
	total := len(pods.Items)
	switch {
	case lead == "" && total == 0:
		r.Status = Warn
		r.Message = fmt.Sprintf("no controller runs in namespace %s: rollouts run only with --wait, and no pool is driven", o.Namespace)
		r.Hint = installHint
	case lead == "":
		r.Status = Fail
		r.Message = fmt.Sprintf("no replica holds the Lease %s/%s (%d of %d pods Ready)", o.Namespace, controller.LeaseName, ready, total)
		r.Hint = fmt.Sprintf("read its log: kubectl -n %s logs -l %s", o.Namespace, controllerSelector)
	case ready < total:
		r.Status = Warn
		r.Message = fmt.Sprintf("%s leads; %d of %d pods Ready", lead, ready, total)
		r.Hint = fmt.Sprintf("kubectl -n %s get pods -l %s", o.Namespace, controllerSelector)
	default:
		r.Status, r.Message = OK, fmt.Sprintf("%s leads (Lease %s/%s fresh); %d of %d pods Ready", lead, o.Namespace, controller.LeaseName, ready, total)
	}
	return r
}

// checkAgents checks one Ready agent per node, at version v. An agent
// whose version cannot be read from a pod (a systemd agent) but that
// reports on its node is a warning.
func checkAgents(nodes []corev1.Node, pods []corev1.Pod, v string, now time.Time) Result {
	r := Result{Name: "agents"}
	byNode := map[string]*corev1.Pod{}
	for i := range pods {
		if n := pods[i].Spec.NodeName; n != "" && pods[i].DeletionTimestamp == nil {
			byNode[n] = &pods[i]
		}
	}
	var missing, notReady, other, unknown []string
	for i := range nodes {
		n := &nodes[i]
		p, ok := byNode[n.Name]
		switch {
		case !ok && dkcstatus.Agent(n, now) != dkcstatus.AgentNone:
			unknown = append(unknown, n.Name)
		case !ok:
			missing = append(missing, n.Name)
		case !nodehealth.PodReady(p):
			notReady = append(notReady, n.Name)
		default:
			if got := imageTag(p); got != v {
				other = append(other, fmt.Sprintf("%s (%s)", n.Name, orUnknown(got)))
			}
		}
	}
	var msgs, hints []string
	if len(missing) > 0 {
		msgs = append(msgs, "no agent on "+strings.Join(missing, ", "))
		hints = append(hints, "run the agent on every node (docs/install.md)")
	}
	if len(notReady) > 0 {
		msgs = append(msgs, "agent not Ready on "+strings.Join(notReady, ", "))
		hints = append(hints, "kubectl describe pod -A -l "+agentSelector+" says why one is not Ready")
	}
	if len(other) > 0 {
		msgs = append(msgs, "agent at another version than "+v+" on "+strings.Join(other, ", "))
		hints = append(hints, "run the agent image of the same version as kubectl dkc (docs/install.md, The image)")
	}
	switch {
	case len(msgs) > 0:
		r.Status, r.Message, r.Hint = Fail, strings.Join(msgs, "; "), strings.Join(hints, "; ")
	case len(unknown) > 0:
		r.Status = Warn
		r.Message = fmt.Sprintf("agents without a pod (systemd units) report on %s: their version cannot be known from the API", strings.Join(unknown, ", "))
		r.Hint = "on each node: kubectl-dkc-agent version"
	default:
		r.Status, r.Message = OK, fmt.Sprintf("%d of %d nodes run a Ready agent at %s", len(nodes), len(nodes), v)
	}
	return r
}

// imageTag is the tag of a pod's first container's image, "" without one.
func imageTag(p *corev1.Pod) string {
	if len(p.Spec.Containers) == 0 {
		return ""
	}
	image, _, _ := strings.Cut(p.Spec.Containers[0].Image, "@")
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[i+1:]
	}
	return ""
}

func orUnknown(s string) string {
	if s == "" {
		return "no tag"
	}
	return s
}

// checkPolicies checks that every policy of deploy/admission-policy.yaml
// and its binding exist. A kustomize namePrefix or nameSuffix keeps the
// name inside, so a name is found inside another.
func (o *Options) checkPolicies(ctx context.Context) Result {
	r := Result{Name: "admission policies"}
	adm := o.Client.AdmissionregistrationV1()
	policies, err := adm.ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
	if err != nil {
		r.Status, r.Message = Fail, fmt.Sprintf("list ValidatingAdmissionPolicies: %v", err)
		return r
	}
	bindings, err := adm.ValidatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		r.Status, r.Message = Fail, fmt.Sprintf("list ValidatingAdmissionPolicyBindings: %v", err)
		return r
	}
	var pnames, bnames []string
	for _, p := range policies.Items {
		pnames = append(pnames, p.Name)
	}
	for _, b := range bindings.Items {
		if b.Spec.PolicyName != "" {
			bnames = append(bnames, b.Spec.PolicyName)
		}
	}
	var missing []string
	for _, want := range Policies {
		switch {
		case !containsName(pnames, want):
			missing = append(missing, want)
		case !containsName(bnames, want):
			missing = append(missing, want+" (its binding)")
		}
	}
	if len(missing) > 0 {
		r.Status, r.Message = Fail, "missing: "+strings.Join(missing, ", ")
		r.Hint = "apply deploy/admission-policy.yaml (kubectl apply --server-side -k deploy/; docs/security.md)"
		return r
	}
	r.Status, r.Message = OK, fmt.Sprintf("all %d in force", len(Policies))
	return r
}

func containsName(names []string, want string) bool {
	for _, n := range names {
		if strings.Contains(n, want) {
			return true
		}
	}
	return false
}

// checkForgedWrites sends, as server-side dry-runs, two writes the
// policies must refuse: an assignment through a Node's status subresource
// (kubectl-dkc-node-assignment) and a pool outside the controller's
// namespace (kubectl-dkc-pool-namespace). Nothing is stored.
func (o *Options) checkForgedWrites(ctx context.Context, nodes []corev1.Node) Result {
	r := Result{Name: "forged writes refused"}
	dry := []string{metav1.DryRunAll}
	var admitted, unknown []string
	judge := func(what string, err error) {
		switch {
		case err == nil:
			admitted = append(admitted, what)
		case refusedByPolicy(err):
		default:
			unknown = append(unknown, fmt.Sprintf("%s: %v", what, err))
		}
	}
	if len(nodes) > 0 {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"{}"}}}`, source.AssignedAnnotation)
		_, err := o.Client.CoreV1().Nodes().Patch(ctx, nodes[0].Name, types.MergePatchType, []byte(patch),
			metav1.PatchOptions{DryRun: dry, FieldManager: source.FieldManager}, "status")
		judge(fmt.Sprintf("an assignment through node/%s's status", nodes[0].Name), err)
	}
	ns := "default"
	if o.Namespace == ns {
		ns = "kube-public"
	}
	_, err := o.Dynamic.Resource(pool.Resource).Namespace(ns).Create(ctx, forgedPool(ns, o.Namespace), metav1.CreateOptions{DryRun: dry})
	judge(fmt.Sprintf("a pool in namespace %s", ns), err)
	switch {
	case len(admitted) > 0:
		r.Status = Fail
		r.Message = "admitted: " + strings.Join(admitted, "; ")
		r.Hint = "apply deploy/admission-policy.yaml (kubectl apply --server-side -k deploy/; docs/security.md)"
	case len(unknown) > 0:
		r.Status = Warn
		r.Message = "cannot be known: " + strings.Join(unknown, "; ")
		r.Hint = "run check with a credential that may patch nodes/status and create nodeconfigpools"
	default:
		r.Status, r.Message = OK, "an assignment through a Node's status and a pool outside "+o.Namespace+" are refused (server-side dry-runs)"
	}
	return r
}

// refusedByPolicy reports whether err is an admission policy's refusal,
// not RBAC's.
func refusedByPolicy(err error) bool {
	return (apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy")
}

// forgedPool is a valid pool in namespace ns, of a ConfigMap in configNS.
func forgedPool(ns, configNS string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": pool.Resource.GroupVersion().String(),
		"kind":       pool.Kind,
		"metadata":   map[string]any{"name": "kubectl-dkc-check", "namespace": ns},
		"spec": map[string]any{
			"nodeSelector": map[string]any{"matchLabels": map[string]any{"kubectl-dkc.io/check": "none"}},
			"configSource": map[string]any{"configMap": map[string]any{
				"namespace": configNS, "name": "kubectl-dkc-check", "kubeletConfigKey": source.DefaultKey,
			}},
		},
	}}
}

// agentForbidden are what the agent's ServiceAccount must not be allowed
// (docs/agent.md, "Permissions, each one justified").
var agentForbidden = []struct {
	verb, group, resource, sub, namespace string
}{
	{verb: "get", resource: "secrets"},
	{verb: "list", resource: "secrets"},
	{verb: "get", resource: "nodes", sub: "proxy"},
	{verb: "patch", resource: "nodes"},
	{verb: "delete", resource: "nodes"},
	{verb: "create", resource: "pods", sub: "exec"},
	{verb: "create", resource: "serviceaccounts", sub: "token"},
	{verb: "update", resource: "configmaps", namespace: source.DefaultNamespace},
	{verb: "create", group: "kubectl-dkc.io", resource: "nodeconfigrollouts", namespace: source.DefaultNamespace},
}

// checkAgentPermissions asks the apiserver (SubjectAccessReviews) whether
// the agents' ServiceAccount may do what it must not.
func (o *Options) checkAgentPermissions(ctx context.Context, agents []corev1.Pod) Result {
	r := Result{Name: "agent permissions"}
	accounts := map[string]bool{}
	for _, p := range agents {
		sa := p.Spec.ServiceAccountName
		if sa == "" {
			sa = "default"
		}
		accounts["system:serviceaccount:"+p.Namespace+":"+sa] = true
	}
	if len(accounts) == 0 {
		r.Status, r.Message = Warn, "no agent pod: the permissions of a systemd agent's credential cannot be known from here"
		return r
	}
	var wider []string
	for user := range accounts {
		ns := strings.Split(user, ":")[2]
		for _, f := range agentForbidden {
			groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
			allowed, err := mayDo(ctx, o.Client, user, groups, &authorizationv1.ResourceAttributes{
				Verb: f.verb, Group: f.group, Resource: f.resource, Subresource: f.sub, Namespace: f.namespace,
			})
			if err != nil {
				r.Status, r.Message = Warn, fmt.Sprintf("cannot be known: %v", err)
				r.Hint = "run check with a credential that may create subjectaccessreviews"
				return r
			}
			if allowed {
				what := f.resource
				if f.sub != "" {
					what += "/" + f.sub
				}
				wider = append(wider, fmt.Sprintf("%s may %s %s", user, f.verb, what))
			}
		}
	}
	if len(wider) > 0 {
		r.Status, r.Message = Fail, "wider than documented: "+strings.Join(wider, "; ")
		r.Hint = "bind the agent's ServiceAccount to deploy/rbac.yaml's roles only (docs/agent.md, Permissions)"
		return r
	}
	r.Status, r.Message = OK, fmt.Sprintf("no wider than documented (%d denials checked)", len(agentForbidden))
	return r
}

// appliesDropIn reports whether an agent pod runs with --apply-mode=dropin.
func appliesDropIn(agents []corev1.Pod) map[string]bool {
	out := map[string]bool{}
	for _, p := range agents {
		for _, c := range p.Spec.Containers {
			for _, a := range c.Args {
				if a == "--apply-mode=dropin" {
					out[p.Spec.NodeName] = true
				}
			}
		}
	}
	return out
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

// mayDo asks the apiserver whether user, in groups, may do attrs.
func mayDo(ctx context.Context, client kubernetes.Interface, user string, groups []string, attrs *authorizationv1.ResourceAttributes) (bool, error) {
	r, err := client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: attrs},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return r.Status.Allowed, nil
}
