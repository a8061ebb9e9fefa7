package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dkc/dkc/pkg/agent"
	"github.com/kubectl-dkc/dkc/pkg/kubelet"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// The messages of deploy/admission-policy.yaml's kubectl-dkc-agent-own-node.
const (
	noNodeMessage    = "the dkc agent's credential names no node, so it may write no Node"
	otherNodeMessage = "an agent writes only its own Node"
)

// TestPrivilege proves the agent's least privilege on a real 1.37 apiserver
// and real kubelets: deploy/rbac.yaml without nodes/proxy, the per-node
// confinement of deploy/admission-policy.yaml for tokens bound to agent
// pods, the host identity of deploy/rbac-host.yaml (the kubelet's own
// credential), and an agent on a bound token that applies a config through
// the health gate that reads its kubelet directly. It measures what the
// policies cost a kubelet heartbeat.
func TestPrivilege(t *testing.T) {
	c := framework.Setup(t, framework.Options{Nodes: 2})
	ctx := context.Background()
	a, b := c.Nodes[0], c.Nodes[1]
	for _, m := range []string{"rbac.yaml", "rbac-host.yaml"} {
		if err := c.ApplyManifest(ctx, filepath.Join("..", "..", "deploy", m), false); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("the harness issues service-account tokens and its kubelets authorize by webhook", func(t *testing.T) {
		raw, err := c.Client.Discovery().RESTClient().Get().AbsPath("/.well-known/openid-configuration").DoRaw(ctx)
		if err != nil {
			t.Fatalf("the apiserver serves no service-account issuer discovery (--service-account-issuer, --service-account-signing-key-file): %v", err)
		}
		var oidc struct {
			Issuer string `json:"issuer"`
		}
		if err := json.Unmarshal(raw, &oidc); err != nil || oidc.Issuer != "https://kubernetes.default.svc" {
			t.Errorf("service-account issuer = %q (%v), want https://kubernetes.default.svc", oidc.Issuer, err)
		}
		for _, n := range c.Nodes {
			cz := configz(t, c, n.Name)
			authn, _ := cz["authentication"].(map[string]any)
			webhook, _ := authn["webhook"].(map[string]any)
			anonymous, _ := authn["anonymous"].(map[string]any)
			authz, _ := cz["authorization"].(map[string]any)
			if authz["mode"] != "Webhook" || webhook["enabled"] != true || anonymous["enabled"] != false {
				t.Errorf("kubelet %s: authorization.mode %v, webhook authentication %v, anonymous %v; want Webhook, true, false",
					n.Name, authz["mode"], webhook["enabled"], anonymous["enabled"])
			}
		}
	})

	// Agent pods bound to a and b (they never run), and tokens.
	podA, err := c.AgentPod(ctx, "dkc-agent-a", a.Name)
	if err != nil {
		t.Fatal(err)
	}
	podB, err := c.AgentPod(ctx, "dkc-agent-b", b.Name)
	if err != nil {
		t.Fatal(err)
	}
	tokenKubeconfig := func(name string, pod *corev1.Pod) string {
		t.Helper()
		tok, err := c.AgentToken(ctx, pod)
		if err != nil {
			t.Fatal(err)
		}
		path, err := c.TokenKubeconfig(name, tok)
		if err != nil {
			t.Fatal(err)
		}
		return path
	}
	kcA, kcB, kcUnbound := tokenKubeconfig("agent-a", podA), tokenKubeconfig("agent-b", podB), tokenKubeconfig("agent-unbound", nil)
	clientA, clientB, clientUnbound := kubeconfigClient(t, kcA), kubeconfigClient(t, kcB), kubeconfigClient(t, kcUnbound)
	certKubeconfig, err := c.UserKubeconfig(framework.AgentIdentity)
	if err != nil {
		t.Fatal(err)
	}
	clientCert := kubeconfigClient(t, certKubeconfig)
	nodeA := nodeCredentialClient(t, c, 0)

	t.Run("a token bound to a pod names the pod's node", func(t *testing.T) {
		for _, tc := range []struct {
			who    string
			client kubernetes.Interface
			want   []string
		}{{"token of the pod on " + a.Name, clientA, []string{a.Name}}, {"token of the pod on " + b.Name, clientB, []string{b.Name}}, {"unbound token", clientUnbound, nil}} {
			r, err := tc.client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			u := r.Status.UserInfo
			got := []string(u.Extra["authentication.kubernetes.io/node-name"])
			if u.Username != framework.AgentIdentity || strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("%s: user %q with node-name %q, want %q with %q", tc.who, u.Username, got, framework.AgentIdentity, tc.want)
			}
		}
	})

	// What a kubelet heartbeat costs, before the policies: the node's own
	// credential patching its Node through nodes/status, as the kubelet does.
	const beats = 300
	beatCfg, err := clientcmd.BuildConfigFromFlags("", a.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	beatCfg.QPS = -1 // no client-side rate limit: time the apiserver
	beatClient, err := kubernetes.NewForConfig(beatCfg)
	if err != nil {
		t.Fatal(err)
	}
	before := heartbeats(t, c, beatClient, a.Name, beats)

	if err := c.ApplyManifest(ctx, filepath.Join("..", "..", "deploy", "admission-policy.yaml"), false); err != nil {
		t.Fatal(err)
	}
	statusPatch := []byte(`{"metadata":{"annotations":{"` + source.Prefix + `e2e-privilege":"x"}}}`)
	patch := func(client kubernetes.Interface, node string, body []byte, dryRun bool, sub ...string) error {
		opts := metav1.PatchOptions{FieldManager: source.FieldManager}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		_, err := client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, body, opts, sub...)
		return err
	}
	deniedWith := func(err error, msg string) bool {
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), msg)
	}
	waitFor(t, 30*time.Second, "the per-node policy to deny an unbound token", func() bool {
		return deniedWith(patch(clientUnbound, a.Name, statusPatch, true, "status"), noNodeMessage)
	})
	after := heartbeats(t, c, beatClient, a.Name, beats)

	t.Run("what the policies cost a heartbeat", func(t *testing.T) {
		t.Logf("%d node-status patches by %s's own credential: without the policies %s; with them %s",
			beats, a.Name, before, after)
		// A kubelet still registers and reports through both policies: a
		// restarted one posts its status at once (otherwise only every
		// nodeStatusReportFrequency, 5m).
		restartReports(t, c, b.Name, b.RestartKubelet)
	})

	stPatch, err := source.StatusPatch(source.Annotation, &corev1.NodeConfigStatus{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a pod-bound token writes its own Node and no other", func(t *testing.T) {
		for _, tc := range []struct {
			who        string
			client     kubernetes.Interface
			own, other string
		}{{"agent on " + a.Name, clientA, a.Name, b.Name}, {"agent on " + b.Name, clientB, b.Name, a.Name}} {
			for what, body := range map[string][]byte{"status": stPatch, "an annotation": statusPatch} {
				if err := patch(tc.client, tc.own, body, false, "status"); err != nil {
					t.Errorf("%s writing %s of its own Node %s: %v", tc.who, what, tc.own, err)
				}
				if err := patch(tc.client, tc.other, body, false, "status"); !deniedWith(err, otherNodeMessage) {
					t.Errorf("%s writing %s of Node %s: err %v, want Forbidden with %q", tc.who, what, tc.other, err, otherNodeMessage)
				}
			}
			// On the Node itself (RBAC grants patch there for the startup
			// taint) the policy lets it change nothing else.
			// (Another value than the status patch's: an unchanged
			// annotation is no change.)
			throughNodes := []byte(`{"metadata":{"annotations":{"` + source.Prefix + `e2e-privilege":"through-nodes"}}}`)
			if err := patch(tc.client, tc.own, throughNodes, true); !deniedWith(err, "but through its status, except to remove the startup taint") {
				t.Errorf("%s patching its Node (not the status): err %v, want the policy's Forbidden", tc.who, err)
			}
		}
	})

	t.Run("a credential without a node writes no Node", func(t *testing.T) {
		for _, tc := range []struct {
			who    string
			client kubernetes.Interface
		}{{"unbound token", clientUnbound}, {"client certificate of " + framework.AgentIdentity, clientCert}} {
			for _, n := range c.Nodes {
				if err := patch(tc.client, n.Name, stPatch, false, "status"); !deniedWith(err, noNodeMessage) {
					t.Errorf("%s writing the status of %s: err %v, want Forbidden with %q", tc.who, n.Name, err, noNodeMessage)
				}
			}
		}
	})

	t.Run("a pod-bound token creates and deletes only its own node's probe pod", func(t *testing.T) {
		// The ServiceAccount admission plugin names "default" for a pod
		// that names none; the harness runs no controller that makes it.
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "kube-system"}}
		if _, err := c.Client.CoreV1().ServiceAccounts("kube-system").Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		probe := func(edit func(p *corev1.Pod)) *corev1.Pod {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "dkc-probe-" + a.Name, Namespace: "kube-system",
					Labels: map[string]string{agent.ProbePodLabel: "true"}},
				Spec: corev1.PodSpec{
					NodeName:                     a.Name,
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr.To(false),
					Containers: []corev1.Container{{Name: "probe", Image: "registry.example/kubectl-dkc-probe:v1",
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)}}},
				},
			}
			if edit != nil {
				edit(p)
			}
			return p
		}
		dryRun := []string{metav1.DryRunAll}
		create := func(p *corev1.Pod) error {
			_, err := clientA.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{DryRun: dryRun})
			return err
		}
		waitFor(t, 30*time.Second, "the probe-pod policy to deny a pod on another node", func() bool {
			return deniedWith(create(probe(func(p *corev1.Pod) { p.Spec.NodeName = b.Name })), "may create and delete only pods bound to its own node")
		})
		if err := create(probe(nil)); err != nil {
			t.Errorf("agent on %s creating its probe pod (dry-run): %v", a.Name, err)
		}
		for what, tc := range map[string]struct {
			edit func(p *corev1.Pod)
			want string
		}{
			"on another node":    {func(p *corev1.Pod) { p.Spec.NodeName = b.Name }, "may create and delete only pods bound to its own node"},
			"without the label":  {func(p *corev1.Pod) { p.Labels = nil }, "which carry the label kubectl-dkc.io/probe-pod=true"},
			"of another image":   {func(p *corev1.Pod) { p.Spec.Containers[0].Image = "registry.example/kubectl-dkc-agent:v1" }, "runs only the image kubectl-dkc-probe"},
			"with an init image": {func(p *corev1.Pod) { p.Spec.InitContainers = []corev1.Container{{Name: "i", Image: "busybox"}} }, "runs only the image kubectl-dkc-probe"},
			"privileged": {func(p *corev1.Pod) {
				p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
			}, "asks for no privileges"},
			"escalating":          {func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil }, "asks for no privileges"},
			"in the host network": {func(p *corev1.Pod) { p.Spec.HostNetwork = true }, "uses no host namespace"},
			"with a hostPath": {func(p *corev1.Pod) {
				p.Spec.Volumes = []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			}, "mounts no volume but emptyDir"},
			"with a Secret in env": {func(p *corev1.Pod) {
				p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}}}
			}, "takes no Secret or ConfigMap"},
			// The ServiceAccount admission plugin mounts the token as a
			// projected volume, which the volume rule refuses first.
			"with a token": {func(p *corev1.Pod) { p.Spec.AutomountServiceAccountToken = nil }, "service account token"},
		} {
			if err := create(probe(tc.edit)); !deniedWith(err, tc.want) {
				t.Errorf("agent on %s creating a probe pod %s: err %v, want Forbidden with %q", a.Name, what, err, tc.want)
			}
		}
		// Its own agent pod (no probe label) it may not delete.
		err := clientA.CoreV1().Pods("kube-system").Delete(ctx, podA.Name, metav1.DeleteOptions{DryRun: dryRun})
		if !deniedWith(err, "which carry the label kubectl-dkc.io/probe-pod=true") {
			t.Errorf("agent on %s deleting pod %s: err %v, want Forbidden", a.Name, podA.Name, err)
		}
		// And RBAC gives it no pod writes outside its namespace.
		p := probe(nil)
		p.Namespace = "default"
		if err := create(p); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `cannot create resource "pods"`) {
			t.Errorf("agent on %s creating a probe pod in default: err %v, want RBAC's Forbidden", a.Name, err)
		}
	})

	t.Run("kubectl auth can-i: no nodes/proxy, no Secrets", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"get", "nodes", "--subresource=proxy"}, "no"},
			{[]string{"create", "nodes", "--subresource=proxy"}, "no"},
			{[]string{"get", "secrets", "-n", "kube-system"}, "no"},
			{[]string{"list", "secrets", "--all-namespaces"}, "no"},
			{[]string{"create", "pods", "--subresource=exec", "-n", "kube-system"}, "no"},
			{[]string{"patch", "nodes"}, "yes"},
			{[]string{"update", "nodes"}, "no"},
			{[]string{"get", "nodes", "--subresource=healthz"}, "yes"},
			{[]string{"get", "nodes", "--subresource=configz"}, "yes"},
			{[]string{"patch", "nodes", "--subresource=status"}, "yes"},
			{[]string{"watch", "configmaps", "-n", "kube-system"}, "yes"},
			{[]string{"get", "configmaps", "-n", "default"}, "no"},
		} {
			if got := canI(t, kcA, tc.args...); got != tc.want {
				t.Errorf("agent (token of %s): kubectl auth can-i %s = %q, want %q", podA.Name, strings.Join(tc.args, " "), got, tc.want)
			}
		}
	})

	t.Run("the kubelet serves a pod-bound token healthz and configz, nothing else", func(t *testing.T) {
		tok, err := c.AgentToken(ctx, podA)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			n    *framework.Node
			path string
			want int
		}{
			{a, "/healthz", http.StatusOK},
			{a, "/configz", http.StatusOK},
			{a, "/pods", http.StatusForbidden},
			{a, "/runningpods/", http.StatusForbidden},
			{a, "/containerLogs/kube-system/dkc-agent-a/agent", http.StatusForbidden},
			{a, "/exec/kube-system/dkc-agent-a/agent?command=id", http.StatusForbidden},
			// RBAC cannot name "the node of the token" for the kubelet's
			// SubjectAccessReview: the token reads other kubelets' healthz
			// and configz too (docs/security.md says so).
			{b, "/configz", http.StatusOK},
			{b, "/pods", http.StatusForbidden},
		} {
			client, err := kubelet.NewKubeletClient(&rest.Config{BearerToken: tok}, kubelet.KubeletTLS{CAFile: tc.n.KubeletCAFile(), ServerName: tc.n.Name})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Get("https://" + tc.n.IP + ":10250" + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("GET %s%s with the token of %s: %s %q, want %d", tc.n.Name, tc.path, podA.Name, resp.Status, body, tc.want)
			}
		}
	})

	t.Run("the host identity cannot write another Node", func(t *testing.T) {
		if err := patch(nodeA, a.Name, stPatch, false, "status"); err != nil {
			t.Errorf("%s's credential writing its own status: %v", a.Name, err)
		}
		for _, sub := range [][]string{{"status"}, nil} {
			err := patch(nodeA, b.Name, statusPatch, false, sub...)
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), fmt.Sprintf("node %q is not allowed to modify node %q", a.Name, b.Name)) {
				t.Errorf("%s's credential patching Node %s %v: err %v, want NodeRestriction's Forbidden", a.Name, b.Name, sub, err)
			}
		}
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"get", "nodes", "--subresource=proxy"}, "no"},
			{[]string{"get", "secrets", "-n", "kube-system"}, "no"},
			{[]string{"get", "nodes", "--subresource=configz"}, "yes"},
			{[]string{"get", "nodes", "--subresource=healthz"}, "yes"},
			{[]string{"watch", "configmaps", "-n", "kube-system"}, "yes"},
		} {
			if got := canI(t, a.KubeconfigPath, tc.args...); got != tc.want {
				t.Errorf("system:node:%s: kubectl auth can-i %s = %q, want %q", a.Name, strings.Join(tc.args, " "), got, tc.want)
			}
		}
	})

	t.Run("an agent on a pod-bound token applies a config, reading its kubelet directly", func(t *testing.T) {
		createConfigMap(t, c, "privilege-42", framework.ConfigWith(t, a.DefaultKubeletConfig(), framework.MaxPods(42)))
		ag, err := a.StartAgent(framework.DKCBinary(), a.AgentArgs(framework.AgentOptions{Kubeconfig: kcA, TrialDuration: 5 * time.Second, RequireAdmissionPolicy: true, Extra: []string{"-v=2"}}))
		if err != nil {
			t.Fatal(err)
		}
		starts := a.KubeletStarts()
		mustDKC(t, c, "", "assign", a.Name, "--config", "privilege-42")
		// From here: assign itself asks the node proxy, for the kubelet's
		// /flagz, before it writes; the agent's apply, a restart and a
		// gate, takes longer than this read.
		proxyBefore := apiserverMetric(t, c, "apiserver_request_total", `resource="nodes"`, `subresource="proxy"`)
		st := eventuallyStatus(t, c, a.Name, 90*time.Second, Active("privilege-42"), LKG("privilege-42"), NoError())
		if st.Error != "" {
			t.Errorf("status error %q", st.Error)
		}
		if got := a.KubeletStarts(); got != starts+1 {
			t.Errorf("kubelet started %d times, want 1", got-starts)
		}
		node, err := c.Client.CoreV1().Nodes().Get(ctx, a.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := node.Status.Capacity.Pods().Value(); got != 42 {
			t.Errorf("pod capacity %d, want 42", got)
		}
		// The gate compared configz without nodes/proxy: nobody asked the
		// apiserver's node proxy meanwhile.
		if after := apiserverMetric(t, c, "apiserver_request_total", `resource="nodes"`, `subresource="proxy"`); after != proxyBefore {
			t.Errorf("node proxy requests went from %v to %v during the apply, want none", proxyBefore, after)
		}
		if err := ag.Stop(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("an expression that errors refuses heartbeats", func(t *testing.T) {
		// What failurePolicy Fail does with an expression that cannot be
		// evaluated: a match condition reading a key the user's extra lacks.
		name := "kubectl-dkc-e2e-erroring"
		fail := admissionregistrationv1.Fail
		policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: &fail,
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					ResourceNames: []string{a.Name},
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"nodes/status"}},
					},
				}}},
				MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "erroring", Expression: `request.userInfo.extra['no-such-key'][0] == 'x'`}},
				Validations:     []admissionregistrationv1.Validation{{Expression: "true"}},
			},
		}
		adm := c.Client.AdmissionregistrationV1()
		if _, err := adm.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = adm.ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{}) }()
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
		}
		if _, err := adm.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = adm.ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{}) }()
		var last error
		waitFor(t, 30*time.Second, "the erroring policy to refuse a heartbeat (dry run)", func() bool {
			last = patch(nodeA, a.Name, statusPatch, true, "status")
			return last != nil
		})
		t.Logf("a heartbeat of %s under a policy whose match condition errors: %v", a.Name, last)
		if !apierrors.IsForbidden(last) && !apierrors.IsInvalid(last) {
			t.Errorf("heartbeat under an erroring policy: %v, want it refused", last)
		}
	})
}

// heartbeats patches node's status n times with client, as a kubelet's
// heartbeat does, and summarizes the latencies seen by the client and the
// mean time the apiserver spent in its ValidatingAdmissionPolicy admission
// plugin per UPDATE meanwhile (from its
// apiserver_admission_controller_admission_duration_seconds histogram).
func heartbeats(t *testing.T, c *framework.Cluster, client kubernetes.Interface, node string, n int) string {
	t.Helper()
	vap := func() (sum, count float64) {
		const m = "apiserver_admission_controller_admission_duration_seconds"
		labels := []string{`name="ValidatingAdmissionPolicy"`, `operation="UPDATE"`}
		return apiserverMetric(t, c, m+"_sum", labels...), apiserverMetric(t, c, m+"_count", labels...)
	}
	sum0, count0 := vap()
	d := make([]time.Duration, 0, n)
	for i := range n {
		body := fmt.Sprintf(`{"metadata":{"annotations":{"%se2e-heartbeat":"%d"}}}`, source.Prefix, i)
		began := time.Now()
		if _, err := client.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(body), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatalf("heartbeat %d of %s: %v", i, node, err)
		}
		d = append(d, time.Since(began))
	}
	sum1, count1 := vap()
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	q := func(p float64) time.Duration { return d[int(p*float64(len(d)-1))].Round(10 * time.Microsecond) }
	mean := time.Duration((sum1 - sum0) / (count1 - count0) * float64(time.Second))
	return fmt.Sprintf("client median %s, p90 %s, p99 %s; admission plugin ValidatingAdmissionPolicy %s per UPDATE (mean of %.0f)",
		q(0.5), q(0.9), q(0.99), mean.Round(100*time.Nanosecond), count1-count0)
}

// canI runs the pinned kubectl's `auth can-i` with kubeconfig and returns
// its answer, "yes" or "no", without the reason kubectl may add after it.
func canI(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	kubectl, err := framework.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig, "auth", "can-i"}, args...)...).Output()
	// "no", or "no - <the authorizer's reason>".
	got, _, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if err != nil && got != "no" {
		t.Fatalf("kubectl auth can-i %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return got
}

// apiserverMetric sums the apiserver's metric name over the series whose
// labels contain every one of labels.
func apiserverMetric(t *testing.T, c *framework.Cluster, name string, labels ...string) float64 {
	t.Helper()
	body, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
next:
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue next
			}
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}
