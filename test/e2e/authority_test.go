package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubectl-dkc/dkc/pkg/agent"
	"github.com/kubectl-dkc/dkc/pkg/pool"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// The identities of TestAuthority, each bound to what docs/security.md's
// authority table gives it.
const (
	authAssigner  = "e2e-assigner"
	authOperator  = "e2e-rollout-operator"
	authPoolOwner = "e2e-pool-author"
	authCMWriter  = "e2e-configmap-writer"
	authClass     = "security"
)

// TestAuthority proves docs/security.md's authority table on a kubeadm
// node with deploy/ installed as shipped (the agent's DaemonSet, the
// controller's Deployment, the admission policies and the roles): each
// identity, with the shipped roles, through every path it has (assign, a
// raw patch of the pin, a rollout, an undo, a pool, a ConfigMap edit),
// without and with the verb use on an unsafe class. Every denied path
// leaves the kubelet as it was (kubelet.service's MainPID unchanged) and
// writes nothing; every granted path applies. No identity reaches further
// through the controller than its roles say: the controller's own token
// changes nothing on a Node but dkc's annotations and cordoning, and a
// rollout's spec does not change after it is created. The subtests' names
// are the ones the table cites (cmd/docs_test.go holds them together).
func TestAuthority(t *testing.T) {
	c, _, n := kubeadmDKC(t, "dkc-authority")
	ctx := context.Background()
	local, err := os.ReadFile(n.Path("/var/lib/kubelet/config.yaml"))
	if err != nil {
		t.Fatal(err)
	}

	// The identities, as an organisation would bind them: the assigner
	// with a role of its own (patch nodes is not dkc's to ship), the
	// others with deploy/roles.yaml's, the ConfigMap writer with a Role in
	// the config namespace.
	createClusterRole(t, c, "e2e:assigner", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}},
	})
	bind(t, c, authAssigner, "e2e:assigner")
	bind(t, c, authOperator, "kubectl-dkc:rollout-operator")
	bind(t, c, authPoolOwner, "kubectl-dkc:pool-author")
	createClusterRole(t, c, "e2e:configmap-writer", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "update", "patch"}},
	})
	bind(t, c, authCMWriter, "e2e:configmap-writer")

	// payload is the node's own config with maxPods and the security
	// field enableContentionProfiling set: a change of that field is in
	// class security, refused unless the pin allows it.
	payload := func(maxPods int, profiling bool) string {
		return framework.ConfigWith(t, local, func(cfg map[string]any) {
			cfg["maxPods"] = maxPods
			cfg["enableContentionProfiling"] = profiling
		})
	}
	denial := source.UnsafeClassDenied(authClass)
	// unchanged runs denied, the paths that must be refused, and checks
	// that the kubelet did not restart and the Node's assignment and pin
	// are what they were.
	unchanged := func(t *testing.T, denied func(t *testing.T)) {
		t.Helper()
		pid, err := n.KubeletMainPID()
		if err != nil {
			t.Fatal(err)
		}
		before := nodeAssignment(t, c, n.Name)
		denied(t)
		if after := nodeAssignment(t, c, n.Name); after != before {
			t.Errorf("the Node's assignment and pin changed:\nbefore %s\nafter  %s", before, after)
		}
		if got, _ := n.KubeletMainPID(); got != pid {
			t.Errorf("kubelet.service's MainPID %d, was %d: a denied path restarted the kubelet", got, pid)
		}
	}
	// grant binds the shipped role of authClass to user, for the rest of
	// the test.
	grant := func(t *testing.T, user string) {
		t.Helper()
		bind(t, c, user, source.UnsafeClassRole(authClass))
		// RBAC is read from the apiserver's informer: wait until it answers.
		waitFor(t, 30*time.Second, user+" may use "+authClass, func() bool {
			return mayUse(ctx, c, user, authClass)
		})
	}
	// contentionProfiling is the security field's value the kubelet runs.
	contentionProfiling := func(t *testing.T) bool {
		t.Helper()
		return configz(t, c, n.Name)["enableContentionProfiling"] == true
	}
	poolReady := func(t *testing.T) {
		t.Helper()
		kubectl(t, c, "", "wait", "-n", "kube-system", "--for=condition=Ready", "ncp/auth", "--timeout=4m")
		eventuallyStatus(t, c, n.Name, 30*time.Second, Active("auth-p"), NoError())
	}
	dynAs := func(t *testing.T, user string) dynamic.Interface {
		t.Helper()
		cfg := rest.CopyConfig(c.RESTConfig)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		d, err := dynamic.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	forbidden := func(t *testing.T, what string, err error, want string) {
		t.Helper()
		if err == nil || !(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want a refusal saying %q", what, err, want)
		}
	}
	refusedCLI := func(t *testing.T, r result, want string) {
		t.Helper()
		if r.ExitCode == 0 || !strings.Contains(r.Stderr, want) {
			t.Errorf("exit %d, stderr %q: want a refusal saying %q", r.ExitCode, r.Stderr, want)
		}
	}

	t.Run("assigner needs use on a class", func(t *testing.T) {
		createConfigMap(t, c, "auth-a", payload(101, true))
		unchanged(t, func(t *testing.T) {
			refusedCLI(t, dkc(t, c, "", "--as", authAssigner, "assign", n.Name, "--config", "auth-a", "--allow-unsafe", authClass), denial)
			// The same pin written by hand: the admission policy judges it.
			pin := pinFor(t, c, "auth-a", []string{authClass})
			_, err := clientAs(t, c, authAssigner).CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType,
				annotationPatch(t, source.PinAnnotation, pin), metav1.PatchOptions{})
			forbidden(t, "a raw patch of a pin allowing "+authClass, err, denial)
			// A pin in another form than dkc's is refused to anyone.
			_, err = c.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType,
				annotationPatch(t, source.PinAnnotation, strings.Replace(pin, `"allowUnsafe":`, `"allowUnsafe" :`, 1)),
				metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			forbidden(t, "a pin not written as dkc writes it", err, "must be written as kubectl dkc assign writes it")
		})
		grant(t, authAssigner)
		mustDKC(t, c, "", "--as", authAssigner, "assign", n.Name, "--config", "auth-a", "--allow-unsafe", authClass)
		eventuallyStatus(t, c, n.Name, 2*time.Minute, Active("auth-a"), NoError())
	})

	t.Run("rollout operator needs use on a class and eviction to drain", func(t *testing.T) {
		// The node's current value of the security field, so that the
		// safe rollout below changes maxPods only.
		profiling := contentionProfiling(t)
		createConfigMap(t, c, "auth-r-unsafe", payload(102, !profiling))
		createConfigMap(t, c, "auth-r-safe", payload(103, profiling))
		unchanged(t, func(t *testing.T) {
			refusedCLI(t, dkc(t, c, "", "--as", authOperator, "rollout", "start", n.Name, "--config", "auth-r-unsafe",
				"--allow-unsafe", authClass, "--name", "auth-r-unsafe"), denial)
			// The same rollout created by hand, and one that drains (the CLI
			// drains only where a resource manager's policy changes, a
			// class of its own): the admission policy judges them.
			_, err := dynAs(t, authOperator).Resource(rollout.Resource).Namespace(source.DefaultNamespace).Create(ctx,
				rawRollout(t, c, "auth-r-raw", n.Name, "auth-r-unsafe", []string{authClass}, false), metav1.CreateOptions{})
			forbidden(t, "a rollout allowing "+authClass+", created by hand", err, denial)
			_, err = dynAs(t, authOperator).Resource(rollout.Resource).Namespace(source.DefaultNamespace).Create(ctx,
				rawRollout(t, c, "auth-r-raw", n.Name, "auth-r-safe", nil, true), metav1.CreateOptions{})
			forbidden(t, "a rollout that drains, created by hand", err, source.EvictionDenied)
			// A rollout over a selector that drains every node, and an undo
			// whose nodes' marks give back a pin that allows the class.
			bySelector := rawRollout(t, c, "auth-r-raw", n.Name, "auth-r-safe", nil, false)
			spec := bySelector.Object["spec"].(map[string]any)
			delete(spec, "nodes")
			spec["selector"], spec["drainAll"] = "kubernetes.io/hostname="+n.Name, true
			_, err = dynAs(t, authOperator).Resource(rollout.Resource).Namespace(source.DefaultNamespace).Create(ctx, bySelector, metav1.CreateOptions{})
			forbidden(t, "a rollout over a selector that drains every node, created by hand", err, source.EvictionDenied)
			undo := rawRollout(t, c, "auth-r-raw", n.Name, "auth-r-safe", nil, false)
			spec = undo.Object["spec"].(map[string]any)
			delete(spec, "nodes")
			delete(spec, "config")
			delete(spec, "pin")
			spec["undoOf"], spec["undoOfUID"], spec["allowUnsafe"] = "some", "0f6b1c0e-5a49-4d55-9d43-4a8b1d3e0c11", []any{authClass}
			_, err = dynAs(t, authOperator).Resource(rollout.Resource).Namespace(source.DefaultNamespace).Create(ctx, undo, metav1.CreateOptions{})
			forbidden(t, "an undo giving back pins that allow "+authClass+", created by hand", err, denial)
		})
		// A rollout of the safe classes is the role's to start.
		mustDKC(t, c, "", "--as", authOperator, "rollout", "start", n.Name, "--config", "auth-r-safe", "--name", "auth-r-safe")
		eventuallyStatus(t, c, n.Name, 2*time.Minute, Active("auth-r-safe"), NoError())
		followToDone(t, c, "auth-r-safe")
		// Its undo sends the node back to the assigner's pin, which allows
		// the class: the undo is judged as any rollout.
		unchanged(t, func(t *testing.T) {
			refusedCLI(t, dkc(t, c, "", "--as", authOperator, "rollout", "undo", "auth-r-safe"), denial)
		})
		grant(t, authOperator)
		mustDKC(t, c, "", "--as", authOperator, "rollout", "start", n.Name, "--config", "auth-r-unsafe",
			"--allow-unsafe", authClass, "--name", "auth-r-unsafe")
		eventuallyStatus(t, c, n.Name, 2*time.Minute, Active("auth-r-unsafe"), NoError())
		followToDone(t, c, "auth-r-unsafe")
	})

	t.Run("pool author needs use on a class and eviction to drain", func(t *testing.T) {
		createConfigMap(t, c, "auth-p", payload(104, !contentionProfiling(t)))
		label(t, c, n.Name, "auth-pool", "workers")
		unchanged(t, func(t *testing.T) {
			_, err := kubectlRun(c, poolManifest("auth-p", []string{authClass}, false), "--as", authPoolOwner, "apply", "--server-side", "-f", "-")
			forbidden(t, "a pool allowing "+authClass, apiError(err), denial)
			_, err = kubectlRun(c, poolManifest("auth-p", nil, true), "--as", authPoolOwner, "apply", "--server-side", "-f", "-")
			forbidden(t, "a pool that drains", apiError(err), source.EvictionDenied)
		})
		grant(t, authPoolOwner)
		if _, err := kubectlRun(c, poolManifest("auth-p", []string{authClass}, false), "--as", authPoolOwner, "apply", "--server-side", "-f", "-"); err != nil {
			t.Fatal(err)
		}
		poolReady(t)
	})

	t.Run("pool outside the controller's namespace is refused", func(t *testing.T) {
		// The controller drives the pools of its namespace only: a pool
		// anywhere else would wait for nothing, so admission refuses it and
		// says where it belongs.
		elsewhere := strings.Replace(poolManifest("auth-p", nil, false), "name: auth\n  namespace: kube-system\n", "name: auth-elsewhere\n  namespace: default\n", 1)
		if !strings.Contains(elsewhere, "namespace: default") {
			t.Fatalf("the pool manifest's metadata changed:\n%s", elsewhere)
		}
		_, err := kubectlRun(c, elsewhere, "--as", authPoolOwner, "apply", "--server-side", "-f", "-")
		forbidden(t, "a pool in namespace default", apiError(err), pool.NamespaceDenied(source.DefaultNamespace))
		if _, err := kubectlRun(c, "", "get", "-n", "default", "ncp/auth-elsewhere"); err == nil {
			t.Error("ncp/auth-elsewhere exists in namespace default: it was admitted")
		}
		// The same pool in the controller's namespace is admitted.
		here := strings.Replace(poolManifest("auth-p", nil, false), "name: auth\n", "name: auth-here\n", 1)
		if _, err := kubectlRun(c, here, "--as", authPoolOwner, "apply", "--server-side", "--dry-run=server", "-f", "-"); err != nil {
			t.Errorf("a pool in namespace %s: %v, want it admitted", source.DefaultNamespace, err)
		}
		// A rollout in a namespace where no controller leads is the CLI's
		// to drive (--wait), and without --wait it is refused, naming the
		// namespace.
		refusedCLI(t, dkc(t, c, "", "rollout", "start", n.Name, "--config", "auth-p", "-n", "default", "--name", "auth-elsewhere"),
			"no controller runs in namespace default")
	})

	t.Run("configmap writer reaches no node", func(t *testing.T) {
		// The pool of the pool author's subtest, made by the admin when it
		// did not run.
		if _, err := kubectlRun(c, "", "get", "-n", "kube-system", "ncp/auth"); err != nil {
			createConfigMap(t, c, "auth-p", payload(104, !contentionProfiling(t)))
			label(t, c, n.Name, "auth-pool", "workers")
			kubectl(t, c, poolManifest("auth-p", []string{authClass}, false), "apply", "--server-side", "-f", "-")
			poolReady(t)
		}
		pid, err := n.KubeletMainPID()
		if err != nil {
			t.Fatal(err)
		}
		cm, err := c.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "auth-p", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before := source.Digest([]byte(cm.Data["kubelet"]))
		cm.Data["kubelet"] = payload(105, true)
		after := source.Digest([]byte(cm.Data["kubelet"]))
		if _, err := clientAs(t, c, authCMWriter).CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		kubectl(t, c, "", "wait", "-n", "kube-system", "--for=condition=Stalled", "ncp/auth", "--timeout=1m")
		reason := kubectl(t, c, "", "get", "-n", "kube-system", "ncp/auth", "-o", `jsonpath={.status.conditions[?(@.type=="Stalled")].reason}`)
		msg := kubectl(t, c, "", "get", "-n", "kube-system", "ncp/auth", "-o", `jsonpath={.status.conditions[?(@.type=="Stalled")].message}`)
		if reason != pool.ReasonDigestMismatch || !strings.Contains(msg, source.ShortDigest(before)) || !strings.Contains(msg, source.ShortDigest(after)) {
			t.Errorf("Stalled %s: %q, want %s naming %s and %s", reason, msg, pool.ReasonDigestMismatch, source.ShortDigest(before), source.ShortDigest(after))
		}
		consistently(t, 5*time.Second, "kubelet.service's MainPID unchanged after the ConfigMap edit", func() bool {
			got, _ := n.KubeletMainPID()
			return got == pid
		})
		// The agent saw the edit: other bytes than its pin's, reported,
		// and the kubelet left on what it runs.
		eventuallyStatus(t, c, n.Name, 30*time.Second, Active("auth-p"), ErrorContains("holds bytes with digest"))
		wantCondition(t, c, n.Name, "False", agent.ReasonPinMismatch)
		// Cleanup for the subtests after: the pool no longer selects the node.
		label(t, c, n.Name, "auth-pool", "")
	})

	t.Run("rollout spec is immutable", func(t *testing.T) {
		createConfigMap(t, c, "auth-s", payload(106, false))
		name := "auth-spec"
		obj := rawRollout(t, c, name, n.Name, "auth-s", nil, false)
		if err := unstructured.SetNestedField(obj.Object, true, "spec", "paused"); err != nil {
			t.Fatal(err)
		}
		dyn, err := dynamic.NewForConfig(c.RESTConfig)
		if err != nil {
			t.Fatal(err)
		}
		res := dyn.Resource(rollout.Resource).Namespace(source.DefaultNamespace)
		if _, err := res.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = res.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"aborted":true}}`), metav1.PatchOptions{})
		})
		for field, value := range map[string]string{
			"maxUnavailable": `2`, "canary": `3`, "soak": `"1m"`, "orderByLabel": `"zone"`, "selector": `"a=b"`,
			"drain": `["` + n.Name + `"]`, "drainOptions": `{"force":true}`, "undoOf": `"other"`,
			"nodes": `["` + n.Name + `","other"]`, "pin": `null`,
		} {
			_, err := res.Patch(ctx, name, types.MergePatchType,
				[]byte(`{"spec":{"`+field+`":`+value+`}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			if !apierrors.IsInvalid(err) {
				t.Errorf("patching spec.%s of a created rollout: err %v, want Invalid", field, err)
			}
		}
		if _, err := res.Patch(ctx, name, types.MergePatchType,
			[]byte(`{"spec":{"paused":false,"aborted":true}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("patching spec.paused and spec.aborted: %v, want them to change", err)
		}
	})

	t.Run("controller token changes only dkc annotations and cordoning", func(t *testing.T) {
		ctl := clientAs(t, c, "system:serviceaccount:kube-system:dkc-controller", "system:serviceaccounts", "system:serviceaccounts:kube-system")
		dry := metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}
		for what, patch := range map[string]string{
			"a label":                    `{"metadata":{"labels":{"e2e":"x"}}}`,
			"a taint":                    `{"spec":{"taints":[{"key":"e2e","effect":"NoSchedule"}]}}`,
			"another annotation":         `{"metadata":{"annotations":{"e2e":"x"}}}`,
			"the agent's status":         `{"metadata":{"annotations":{"` + source.StatusAnnotation + `":"{}"}}}`,
			"the node's provider ID":     `{"spec":{"providerID":"e2e://x"}}`,
			"a finalizer":                `{"metadata":{"finalizers":["e2e/x"]}}`,
			"the node's pod CIDR (spec)": `{"spec":{"podCIDR":"10.0.0.0/24"}}`,
			"a control-plane role label": `{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":""}}}`,
		} {
			_, err := ctl.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, []byte(patch), dry)
			forbidden(t, "the controller changing "+what, err, "the dkc controller may not")
		}
		for what, patch := range map[string]string{
			"a dkc annotation": `{"metadata":{"annotations":{"` + source.Prefix + `e2e":"x"}}}`,
			"cordoning":        `{"spec":{"unschedulable":true}}`,
		} {
			if _, err := ctl.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, []byte(patch), dry); err != nil {
				t.Errorf("the controller %s: %v, want it allowed", what, err)
			}
		}
		if err := ctl.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) {
			t.Errorf("the controller deleting the Node: err %v, want Forbidden", err)
		}
		// Its Leases: its own and the rollouts', no other of kube-system.
		create := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
		for name, allowed := range map[string]bool{
			"kube-scheduler":                  false,
			"kube-controller-manager":         false,
			"kubectl-dkc-controller":          true,
			rollout.LeaseName("some-rollout"): true,
		} {
			lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"}}
			_, err := ctl.CoordinationV1().Leases("kube-system").Create(ctx, lease, create)
			switch {
			case allowed && err != nil && !apierrors.IsAlreadyExists(err):
				t.Errorf("the controller creating Lease %s (dry run): %v, want it allowed", name, err)
			case !allowed:
				forbidden(t, "the controller creating Lease "+name, err, "the dkc controller may not write Lease")
			}
		}
	})

	t.Run("only dkc's identities remove the startup taint", func(t *testing.T) {
		// A Node that registered with the startup taint and another one,
		// in the pool's selection: no kubelet or agent runs for it, so
		// the taint stays while the identities try (dry runs).
		const joiner = "dkc-authority-joiner"
		other := corev1.Taint{Key: "example.com/e2e", Effect: corev1.TaintEffectNoSchedule}
		_, err := c.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: joiner, Labels: map[string]string{"auth-pool": "workers"}},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{
				{Key: source.StartupTaint, Effect: corev1.TaintEffectNoSchedule}, other,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Client.CoreV1().Nodes().Delete(ctx, joiner, metav1.DeleteOptions{}) })
		// remove is a JSON patch that removes the taint with key from
		// node, wherever it is in the list as the patch is applied.
		remove := func(t *testing.T, cs kubernetes.Interface, node, key string) error {
			t.Helper()
			cur, err := c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(cur.Spec.Taints, func(tn corev1.Taint) bool { return tn.Key == key })
			if i < 0 {
				t.Fatalf("node %s has no taint %s: %v", node, key, cur.Spec.Taints)
			}
			patch := fmt.Sprintf(`[{"op":"test","path":"/spec/taints/%d/key","value":%q},{"op":"remove","path":"/spec/taints/%d"}]`, i, key, i)
			_, err = cs.CoreV1().Nodes().Patch(ctx, node, types.JSONPatchType, []byte(patch), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}
		agentOn := func(node string) kubernetes.Interface {
			cfg := rest.CopyConfig(c.RESTConfig)
			cfg.Impersonate = rest.ImpersonationConfig{
				UserName: "system:serviceaccount:kube-system:dkc-agent",
				Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"},
				Extra:    map[string][]string{"authentication.kubernetes.io/node-name": {node}},
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return cs
		}
		ctl := clientAs(t, c, "system:serviceaccount:kube-system:dkc-controller", "system:serviceaccounts", "system:serviceaccounts:kube-system")
		assigner := clientAs(t, c, authAssigner)
		const onlyDKC = "only dkc removes the startup taint " + source.StartupTaint

		forbidden(t, "the assigner removing the startup taint", remove(t, assigner, joiner, source.StartupTaint), onlyDKC)
		if err := remove(t, assigner, joiner, other.Key); err != nil {
			t.Errorf("the assigner removing another taint: %v, want it allowed (patch nodes is Kubernetes' power over taints)", err)
		}
		for who, cs := range map[string]kubernetes.Interface{"the controller": ctl, "the agent on its own Node": agentOn(joiner), "cluster-admin": c.Client} {
			if err := remove(t, cs, joiner, source.StartupTaint); err != nil {
				t.Errorf("%s removing the startup taint: %v, want it allowed", who, err)
			}
		}
		forbidden(t, "the controller removing another taint", remove(t, ctl, joiner, other.Key), "the dkc controller may not change the taints")
		forbidden(t, "the agent removing another taint", remove(t, agentOn(joiner), joiner, other.Key), "the dkc agent may not change the taints")
		forbidden(t, "an agent removing the startup taint of another Node", remove(t, agentOn(n.Name), joiner, source.StartupTaint), "may not write Node '"+joiner+"'")
		got, err := c.Client.CoreV1().Nodes().Get(ctx, joiner, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !source.Pending(got) {
			t.Errorf("node %s lost the startup taint: %v", joiner, got.Spec.Taints)
		}
	})
}

// nodeAssignment is the Node's assignment and pin annotations, for
// comparison.
func nodeAssignment(t *testing.T, c *framework.Cluster, node string) string {
	t.Helper()
	n, err := c.Client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Annotations[source.AssignedAnnotation] + " " + n.Annotations[source.PinAnnotation]
}

// nodeAnnotation is the Node's annotation key, "" when it has none.
func nodeAnnotation(t *testing.T, c *framework.Cluster, node, key string) string {
	t.Helper()
	n, err := c.Client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Annotations[key]
}

// mayUse asks the apiserver whether user may use the unsafe class.
func mayUse(ctx context.Context, c *framework.Cluster, user, class string) bool {
	r, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: []string{"system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: source.Group, Resource: source.UnsafeClassesResource, Name: class, Verb: source.UseVerb,
			}},
	}, metav1.CreateOptions{})
	return err == nil && r.Status.Allowed
}

// clientAs is a clientset of c's admin impersonating user in groups.
func clientAs(t *testing.T, c *framework.Cluster, user string, groups ...string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// pinFor is a pin, as dkc writes it, of ConfigMap cm's bytes allowing
// classes.
func pinFor(t *testing.T, c *framework.Cluster, cm string, classes []string) string {
	t.Helper()
	obj, err := c.Client.CoreV1().ConfigMaps(source.DefaultNamespace).Get(context.Background(), cm, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: source.DefaultNamespace, Name: cm, KubeletConfigKey: source.DefaultKey}}
	b, err := json.Marshal(source.NewPin(src, []byte(obj.Data[source.DefaultKey]), classes))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rawRollout is a NodeConfigRollout of cm to node, pinned to its bytes
// with classes, draining the node when drain.
func rawRollout(t *testing.T, c *framework.Cluster, name, node, cm string, classes []string, drain bool) *unstructured.Unstructured {
	t.Helper()
	var pin map[string]any
	if err := json.Unmarshal([]byte(pinFor(t, c, cm, classes)), &pin); err != nil {
		t.Fatal(err)
	}
	spec := map[string]any{
		"config":         map[string]any{"configMap": map[string]any{"namespace": source.DefaultNamespace, "name": cm, "kubeletConfigKey": source.DefaultKey}},
		"pin":            pin,
		"nodes":          []any{node},
		"maxUnavailable": int64(1),
	}
	if drain {
		spec["drain"] = []any{node}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": rollout.Resource.GroupVersion().String(), "kind": rollout.Kind,
		"metadata": map[string]any{"name": name, "namespace": source.DefaultNamespace},
		"spec":     spec,
	}}
}

// poolManifest is the NodeConfigPool auth over the nodes labelled
// auth-pool=workers, of ConfigMap cm.
func poolManifest(cm string, classes []string, drain bool) string {
	allow := "[]"
	if len(classes) > 0 {
		allow = "[" + strings.Join(classes, ", ") + "]"
	}
	d := "false"
	if drain {
		d = "true"
	}
	return `apiVersion: kubectl-dkc.io/v1alpha1
kind: NodeConfigPool
metadata:
  name: auth
  namespace: kube-system
spec:
  nodeSelector:
    matchLabels:
      auth-pool: workers
  configSource:
    configMap: {namespace: kube-system, name: ` + cm + `, kubeletConfigKey: kubelet}
  allowUnsafe: ` + allow + `
  strategy:
    drain: ` + d + `
`
}

// label sets (or, with value "", removes) label key on node.
func label(t *testing.T, c *framework.Cluster, node, key, value string) {
	t.Helper()
	v := `"` + value + `"`
	if value == "" {
		v = "null"
	}
	if _, err := c.Client.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+key+`":`+v+`}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// apiError turns kubectl's failure into an error that IsForbidden and
// IsInvalid read, keeping its message.
func apiError(err error) error {
	if err == nil {
		return nil
	}
	return apierrors.NewForbidden(rollout.Resource.GroupResource(), "", err)
}
