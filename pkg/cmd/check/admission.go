package check

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-dkc/dkc/pkg/pool"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

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
		r.Hint = "apply deploy/admission-policy.yaml (kubectl dkc install does; docs/security.md)"
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
		r.Hint = "apply deploy/admission-policy.yaml (kubectl dkc install does; docs/security.md)"
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
