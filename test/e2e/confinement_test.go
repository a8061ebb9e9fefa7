package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// The start of kubectl-dkc-agent-own-node's messages for what an agent may
// not change on its own Node (deploy/admission-policy.yaml).
const (
	notLabelsMessage     = "the dkc agent may not change the metadata.labels of Node"
	notFinalizersMessage = "the dkc agent may not change the metadata.finalizers of Node"
	notAnnotationMessage = "the dkc agent may not change the annotations example.com/e2e of Node"
	notConditionMessage  = "the dkc agent may not change conditions other than KubeletConfigOK of Node"
	notStatusMessage     = "the dkc agent may not change the status.capacity of Node"
	notSpecMessage       = "the dkc agent may not change the spec.podCIDR"
	notTaintsMessage     = "the dkc agent may not change the taints of Node"
	notThroughNodes      = "but through its status, except to remove the startup taint"
)

// TestConfinement proves on a real 1.37 apiserver that an agent token
// changes nothing but dkc's own state, and only on its own Node, with
// deploy/ as shipped and renamed by a kustomize overlay (namePrefix,
// nameSuffix, namespace); that the policy does not confine identities that
// are not the agent; and that an agent started without the policy says so
// (condition Unconfined, an Event, its log) and applies nothing until the
// policy is applied.
func TestConfinement(t *testing.T) {
	t.Parallel() // docs/development.md, "Tests in parallel"
	c := framework.Setup(t, framework.Options{Nodes: 2})
	ctx := context.Background()
	a, b := c.Nodes[0], c.Nodes[1]
	deploy := filepath.Join("..", "..", "deploy")
	if err := c.ApplyManifest(ctx, filepath.Join(deploy, "rbac.yaml"), false); err != nil {
		t.Fatal(err)
	}
	clientFor := func(t *testing.T, sa framework.ServiceAccountRef, pod *corev1.Pod) (string, kubernetes.Interface) {
		t.Helper()
		tok, err := c.ServiceAccountToken(ctx, sa, pod)
		if err != nil {
			t.Fatal(err)
		}
		name := sa.Namespace + "-" + sa.Name
		if pod != nil {
			name += "-" + pod.Name
		}
		kc, err := c.TokenKubeconfig(name, tok)
		if err != nil {
			t.Fatal(err)
		}
		return kc, kubeconfigClient(t, kc)
	}
	pod, err := c.AgentPod(ctx, "dkc-agent-confined", a.Name)
	if err != nil {
		t.Fatal(err)
	}
	kc, agentClient := clientFor(t, framework.AgentSA, pod)
	// policyInForce is the starting state of the subtests after the first,
	// which applies deploy/admission-policy.yaml: the policy applied, and
	// in force for the agent's token (a label through nodes/status, as a
	// dry run, is refused).
	policyInForce := func(t *testing.T) {
		t.Helper()
		_, err := c.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "kubectl-dkc-agent-own-node", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			err = c.ApplyManifest(ctx, filepath.Join(deploy, "admission-policy.yaml"), false)
		}
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "the admission policy to refuse the agent a label", func() bool {
			err := patchNode(ctx, agentClient, a.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"example.com/e2e":"x"}}}`), true, "status")
			return apierrors.IsForbidden(err)
		})
	}

	t.Run("without the policy the agent reports Unconfined and applies nothing, then applies once it is in force", func(t *testing.T) {
		createConfigMap(t, c, "confine-42", framework.ConfigWith(t, a.DefaultKubeletConfig(), framework.MaxPods(42)))
		starts := a.KubeletStarts()
		ag, err := a.StartAgent(framework.DKCBinary(), a.AgentArgs(framework.AgentOptions{Kubeconfig: kc, TrialDuration: 5 * time.Second, RequireAdmissionPolicy: true}))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = ag.Stop() }()
		mustDKC(t, c, "", "assign", a.Name, "--config", "confine-42")

		wantCondition(t, c, a.Name, "False", "Unconfined")
		wantEvent(t, c, a.Name, "Unconfined")
		node, err := c.Client.CoreV1().Nodes().Get(ctx, a.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		msg := source.Condition(node.Status.Conditions).Message
		for _, want := range []string{
			"the agent's credential (" + framework.AgentIdentity + ")",
			fmt.Sprintf("can write Node %q and set a label on its own Node %q", b.Name, a.Name),
			"kubectl dkc install", "--require-admission-policy=false", "No config is applied until then",
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("condition message %q lacks %q", msg, want)
			}
		}
		// The condition is written once the check ran, and the sync loop
		// starts only after it: nothing was applied.
		if st, _, err := source.Status(node); err != nil || st != nil {
			t.Errorf("config status %+v (%v), want none: the unconfined agent must not sync", st, err)
		}
		if got := a.KubeletStarts(); got != starts {
			t.Errorf("kubelet started %d times while the agent was unconfined, want 0", got-starts)
		}
		log, err := os.ReadFile(ag.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(log), `"Unconfined: applying no config"`) {
			t.Errorf("the agent's log has no error line for the unconfined check:\n%s", log)
		}

		if err := c.ApplyManifest(ctx, filepath.Join(deploy, "admission-policy.yaml"), false); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		eventuallyStatus(t, c, a.Name, 2*time.Minute, Active("confine-42"), NoError())
		t.Logf("policy applied to config active: %s (the agent checks every 30s)", time.Since(began).Round(time.Millisecond))
		if got := configz(t, c, a.Name)["maxPods"]; got != float64(42) {
			t.Errorf("configz maxPods %v, want 42", got)
		}
		node, err = c.Client.CoreV1().Nodes().Get(ctx, a.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cond := source.Condition(node.Status.Conditions); cond == nil || cond.Reason == "Unconfined" {
			t.Errorf("condition %+v after the apply, want the agent's own reason, not Unconfined", cond)
		}
		log, err = os.ReadFile(ag.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(log), "The admission policies confine the agent") {
			t.Errorf("the agent's log does not say it is confined:\n%s", log)
		}
		if err := ag.Stop(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a pod-bound agent token changes only dkc's state on its own Node", func(t *testing.T) {
		policyInForce(t)
		checkConfined(t, c, framework.AgentSA, agentClient, a.Name, b.Name)
	})

	t.Run("identities that are not the agent are not confined", func(t *testing.T) {
		policyInForce(t)
		label := []byte(`{"metadata":{"labels":{"example.com/e2e":"x"}}}`)
		// The operator, through nodes/status.
		if err := patchNode(ctx, c.Client, a.Name, types.MergePatchType, label, true, "status"); err != nil {
			t.Errorf("admin labelling %s through nodes/status (dry run): %v", a.Name, err)
		}
		// The kubelet's own credential: NodeRestriction lets it label
		// its own Node.
		if err := patchNode(ctx, nodeCredentialClient(t, c, 0), a.Name, types.MergePatchType, label, true); err != nil {
			t.Errorf("%s's credential labelling its own Node (dry run): %v", a.Name, err)
		}
		// A ServiceAccount bound to cluster-admin holds the agent's mark,
		// as every permission, and the wildcard's too: not the agent.
		admin := framework.ServiceAccountRef{Namespace: "kube-system", Name: "e2e-cluster-admin"}
		if _, err := c.Client.CoreV1().ServiceAccounts(admin.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: admin.Name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-cluster-admin"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: admin.Namespace, Name: admin.Name}},
		}
		if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, adminClient := clientFor(t, admin, nil)
		waitFor(t, 30*time.Second, "cluster-admin's ServiceAccount to label a Node through nodes/status (dry run)", func() bool {
			return patchNode(ctx, adminClient, a.Name, types.MergePatchType, label, true, "status") == nil
		})
		// What the policy asks the authorizer.
		for _, tc := range []struct {
			who    string
			client kubernetes.Interface
			verb   string
			want   bool
		}{
			{"the agent", agentClient, "confined", true},
			{"the agent", agentClient, "never-granted", false},
			{"cluster-admin's ServiceAccount", adminClient, "confined", true},
			{"cluster-admin's ServiceAccount", adminClient, "never-granted", true},
		} {
			r, err := tc.client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "kubectl-dkc.io", Resource: "agents", Verb: tc.verb},
			}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if r.Status.Allowed != tc.want {
				t.Errorf("%s may %s agents.kubectl-dkc.io: %v, want %v", tc.who, tc.verb, r.Status.Allowed, tc.want)
			}
		}
	})

	t.Run("renamed by a kustomize overlay: namePrefix, nameSuffix, namespace", func(t *testing.T) {
		dir := t.TempDir()
		abs, err := filepath.Abs(deploy)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(dir, abs)
		if err != nil {
			t.Fatal(err)
		}
		overlay := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n" +
			"namePrefix: e2e-\nnameSuffix: -renamed\nnamespace: dkc-renamed\nresources:\n- " + rel + "\n"
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
			t.Fatal(err)
		}
		kubectl, err := framework.Kubectl()
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(kubectl, "kustomize", dir).Output()
		if err != nil {
			t.Fatalf("kubectl kustomize %s: %v", dir, err)
		}
		renamed := framework.ServiceAccountRef{Namespace: "dkc-renamed", Name: "e2e-dkc-agent-renamed"}
		for _, want := range []string{"name: " + renamed.Name, "namespace: " + renamed.Namespace, "policyName: e2e-kubectl-dkc-agent-own-node-renamed"} {
			if !strings.Contains(string(out), want) {
				t.Fatalf("kubectl kustomize output lacks %q:\n%s", want, out)
			}
		}
		rendered := filepath.Join(dir, "rendered.yaml")
		if err := os.WriteFile(rendered, out, 0o644); err != nil {
			t.Fatal(err)
		}
		// Only the overlay's policies are in force: the unrenamed ones go.
		adm := c.Client.AdmissionregistrationV1()
		for _, name := range []string{"kubectl-dkc-agent-own-node", "kubectl-dkc-node-assignment"} {
			if err := adm.ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			if err := adm.ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: renamed.Namespace}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.ApplyManifest(ctx, rendered, false); err != nil {
			t.Fatal(err)
		}
		pod, err := c.ServiceAccountPod(ctx, renamed, "renamed-agent", a.Name)
		if err != nil {
			t.Fatal(err)
		}
		_, client := clientFor(t, renamed, pod)
		r, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("the renamed agent is %q; the policy names no user", r.Status.UserInfo.Username)
		waitFor(t, 30*time.Second, "the overlay's policy to refuse the renamed agent a label (dry run)", func() bool {
			err := patchNode(ctx, client, a.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"example.com/e2e":"x"}}}`), true, "status")
			return apierrors.IsForbidden(err) && strings.Contains(err.Error(), notLabelsMessage)
		})
		checkConfined(t, c, renamed, client, a.Name, b.Name)
	})
}

// patchNode patches Node name (subresource "" or "status") with client.
func patchNode(ctx context.Context, client kubernetes.Interface, name string, pt types.PatchType, body []byte, dryRun bool, sub ...string) error {
	opts := metav1.PatchOptions{FieldManager: source.FieldManager}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err := client.CoreV1().Nodes().Patch(ctx, name, pt, body, opts, sub...)
	return err
}

// checkConfined proves that client, an agent's token bound to a pod on
// node own (of ServiceAccount sa), changes only dkc's annotations and
// condition on own, and nothing on other, and that the policy holds when
// RBAC grants more than deploy/rbac.yaml.
func checkConfined(t *testing.T, c *framework.Cluster, sa framework.ServiceAccountRef, client kubernetes.Interface, own, other string) {
	t.Helper()
	ctx := context.Background()
	get := func() *corev1.Node {
		t.Helper()
		n, err := c.Client.CoreV1().Nodes().Get(ctx, own, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := get()
	denied := func(err error, msg string) bool {
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), msg)
	}
	merge, strategic := types.MergePatchType, types.StrategicMergePatchType
	for _, tc := range []struct {
		what string
		pt   types.PatchType
		body string
		want string
	}{
		{"a label", merge, `{"metadata":{"labels":{"node-restriction.kubernetes.io/e2e":"x"}}}`, notLabelsMessage},
		{"a finalizer", merge, `{"metadata":{"finalizers":["example.com/e2e"]}}`, notFinalizersMessage},
		{"another annotation", merge, `{"metadata":{"annotations":{"example.com/e2e":"x"}}}`, notAnnotationMessage},
		{"the assignment", merge, `{"metadata":{"annotations":{"` + source.AssignedAnnotation + `":"{}"}}}`, source.AssignedAnnotation},
		{"the pin", merge, `{"metadata":{"annotations":{"` + pinAnnotation + `":"{}"}}}`, pinAnnotation},
		{"another condition", strategic, `{"status":{"conditions":[{"type":"E2EOther","status":"True"}]}}`, notConditionMessage},
		{"the Ready condition", strategic, `{"status":{"conditions":[{"type":"Ready","status":"False","reason":"E2E"}]}}`, notConditionMessage},
		{"another status field", merge, `{"status":{"capacity":{"pods":"1"}}}`, notStatusMessage},
	} {
		err := patchNode(ctx, client, own, tc.pt, []byte(tc.body), false, "status")
		if !denied(err, tc.want) {
			t.Errorf("agent setting %s on its own Node %s through nodes/status: err %v, want Forbidden with %q", tc.what, own, err, tc.want)
		}
	}
	// Through nodes (deploy/rbac.yaml grants patch there for the startup
	// taint), nothing but that taint's removal: no other taint, no other
	// spec, no label, not even a dkc annotation.
	taint := []byte(`{"spec":{"taints":[{"key":"example.com/e2e","effect":"NoSchedule"}]}}`)
	for _, tc := range []struct{ what, body, want string }{
		{"a taint", string(taint), notTaintsMessage},
		{"another spec field", `{"spec":{"podCIDR":"10.9.0.0/24"}}`, notSpecMessage},
		{"a label", `{"metadata":{"labels":{"example.com/e2e":"x"}}}`, notLabelsMessage},
		{"a " + source.Prefix + " annotation", `{"metadata":{"annotations":{"` + source.Prefix + `e2e-through-nodes":"` + time.Now().Format(time.RFC3339Nano) + `"}}}`, notThroughNodes},
	} {
		if err := patchNode(ctx, client, own, merge, []byte(tc.body), false); !denied(err, tc.want) {
			t.Errorf("agent setting %s on its own Node %s through nodes: err %v, want Forbidden with %q", tc.what, own, err, tc.want)
		}
	}
	if err := patchNode(ctx, client, own, merge, taint, false, "status"); err != nil {
		t.Logf("agent tainting its Node through nodes/status: %v", err)
	}

	// What it may write: dkc's annotations and condition.
	stPatch, err := source.StatusPatch(source.Annotation, &corev1.NodeConfigStatus{Error: "e2e"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cond, err := source.ConditionPatch(corev1.NodeCondition{Type: source.ConditionType, Status: corev1.ConditionFalse, Reason: "E2E", Message: "e2e", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what string
		pt   types.PatchType
		body []byte
	}{
		{"the config status", merge, stPatch},
		{"a " + source.Prefix + " annotation", merge, []byte(`{"metadata":{"annotations":{"` + source.Prefix + `e2e-confined":"x"}}}`)},
		{"the " + string(source.ConditionType) + " condition", strategic, cond},
	} {
		if err := patchNode(ctx, client, own, tc.pt, tc.body, false, "status"); err != nil {
			t.Errorf("agent writing %s on its own Node %s: %v", tc.what, own, err)
		}
		if err := patchNode(ctx, client, other, tc.pt, tc.body, false, "status"); !denied(err, otherNodeMessage) {
			t.Errorf("agent writing %s on Node %s: err %v, want Forbidden with %q", tc.what, other, err, otherNodeMessage)
		}
	}

	after := get()
	if st, _, err := source.Status(after); err != nil || st == nil || st.Error != "e2e" {
		t.Errorf("config status %+v (%v), want the agent's", st, err)
	}
	if got := source.Condition(after.Status.Conditions); got == nil || got.Reason != "E2E" {
		t.Errorf("condition %+v, want the agent's", got)
	}
	for k := range after.Labels {
		if _, ok := before.Labels[k]; !ok {
			t.Errorf("label %s appeared", k)
		}
	}
	if len(after.Finalizers) != len(before.Finalizers) || len(after.Spec.Taints) != len(before.Spec.Taints) {
		t.Errorf("finalizers %v, taints %v; want %v, %v", after.Finalizers, after.Spec.Taints, before.Finalizers, before.Spec.Taints)
	}
	for _, k := range []string{"example.com/e2e", source.AssignedAnnotation, pinAnnotation} {
		if v, ok := after.Annotations[k]; ok && v != before.Annotations[k] {
			t.Errorf("annotation %s = %q, was %q", k, v, before.Annotations[k])
		}
	}
	for _, cond := range after.Status.Conditions {
		if cond.Type == "E2EOther" {
			t.Errorf("condition E2EOther appeared")
		}
	}

}
