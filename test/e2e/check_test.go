package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dkc/dkc/pkg/flagz"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// TestCheck runs kubectl dkc check on kubeadm nodes with deploy/ installed
// as shipped: every check passes on the healthy install; a kubelet started
// with --max-pods is named, with its flag, its agent records the field on
// the Node, and assign, rollout start and a pool refuse a config that
// changes maxPods there; an agent at another version
// than the CLI fails the agents' check; a deleted admission policy fails
// the policies' check and lets the forged write through.
func TestCheck(t *testing.T) {
	c, refs, n := kubeadmDKC(t, "dkc-check")
	ctx := context.Background()

	// lines are check's lines but its summary.
	lines := func(r result) []string {
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
			if strings.HasPrefix(l, "✓ ") || strings.HasPrefix(l, "! ") || strings.HasPrefix(l, "✗ ") {
				out = append(out, l)
			}
		}
		return out
	}
	// has reports whether check printed a line that starts with mark and
	// name and says every one of says.
	has := func(r result, mark, name string, says ...string) bool {
		for _, l := range lines(r) {
			if !strings.HasPrefix(l, mark+" "+name+": ") {
				continue
			}
			for _, s := range says {
				if !strings.Contains(l, s) {
					return false
				}
			}
			return true
		}
		return false
	}

	t.Run("a healthy install passes every check", func(t *testing.T) {
		var r result
		// Both controller replicas turn Ready after the leader is elected.
		waitFor(t, 2*time.Minute, "kubectl dkc check to pass every check", func() bool {
			r = dkc(t, c, "", "check")
			return r.ExitCode == 0 && !strings.Contains(r.Stdout, "\n! ")
		})
		for _, l := range lines(r) {
			if !strings.HasPrefix(l, "✓ ") {
				t.Errorf("check: %q, want ✓", l)
			}
		}
		for _, name := range []string{"custom resources", "controller", "agents", "admission policies", "forged writes refused",
			"agent permissions", "node/" + n.Name + " kubelet", "node/" + n.Name + " flags"} {
			if !has(r, "✓", name) {
				t.Errorf("check printed no ✓ %s", name)
			}
		}
	})

	t.Run("a field set by a kubelet flag is named and cannot be assigned", func(t *testing.T) {
		f, err := c.StartKubeadmNodeWith(ctx, "dkc-check-flag", framework.KubeadmNodeOptions{KubeletExtraArgs: map[string]string{"max-pods": "42"}})
		if err != nil {
			t.Fatal(err)
		}
		waitAgentPods(t, c, 2*time.Minute, agentContainerReady)
		// The agent reads its kubelet's /flagz and records the field on
		// the Node; assign and rollout start below refuse from that.
		want := `[{"field":"maxPods","flag":"max-pods","value":"42"}]`
		waitFor(t, time.Minute, "the agent to record --max-pods=42 on node/"+f.Name, func() bool {
			return nodeAnnotation(t, c, f.Name, flagz.Annotation) == want
		})
		if got := nodeAnnotation(t, c, n.Name, flagz.Annotation); got != "[]" {
			t.Errorf("node/%s: %s = %q, want [] (kubeadm sets no such flag)", n.Name, flagz.Annotation, got)
		}
		r := dkc(t, c, "", "check")
		if !has(r, "!", "node/"+f.Name+" flags", "maxPods (set by --max-pods=42)") {
			t.Errorf("check names no maxPods set by --max-pods=42 on node/%s", f.Name)
		}
		if !has(r, "✓", "node/"+n.Name+" flags") {
			t.Errorf("check: node/%s's flags are not ✓", n.Name)
		}
		local, err := os.ReadFile(f.Path("/var/lib/kubelet/config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		createConfigMap(t, c, "check-max-pods", framework.ConfigWith(t, local, func(cfg map[string]any) { cfg["maxPods"] = 50 }))
		want = `node "` + f.Name + `": maxPods (set by --max-pods=42)`
		before := nodeAssignment(t, c, f.Name)
		for _, args := range [][]string{
			{"assign", f.Name, "--config", "check-max-pods"},
			{"rollout", "start", f.Name, "--config", "check-max-pods", "--name", "check-max-pods"},
		} {
			if r := dkc(t, c, "", args...); r.ExitCode != 1 || !strings.Contains(r.Stderr, want) {
				t.Errorf("kubectl dkc %s: exit %d, stderr %q: want a refusal saying %q", strings.Join(args, " "), r.ExitCode, r.Stderr, want)
			}
		}
		if after := nodeAssignment(t, c, f.Name); after != before {
			t.Errorf("node/%s's assignment changed: %q, was %q", f.Name, after, before)
		}
		// The same value as the flag's is no change.
		createConfigMap(t, c, "check-max-pods-same", framework.ConfigWith(t, local, func(cfg map[string]any) { cfg["maxPods"] = 42 }))
		mustDKC(t, c, "", "assign", f.Name, "--config", "check-max-pods-same", "--dry-run=server")

		// A pool plans by the same rule, from the Node's record: it
		// stalls before it starts the node.
		kubectl(t, c, `apiVersion: kubectl-dkc.io/v1alpha1
kind: NodeConfigPool
metadata:
  name: check-flags
  namespace: kube-system
spec:
  nodeSelector:
    matchLabels:
      kubernetes.io/hostname: `+f.Name+`
  configSource:
    configMap: {namespace: kube-system, name: check-max-pods, kubeletConfigKey: kubelet}
`, "apply", "--server-side", "-f", "-")
		defer kubectl(t, c, "", "delete", "-n", "kube-system", "ncp/check-flags")
		kubectl(t, c, "", "wait", "-n", "kube-system", "--for=condition=Stalled", "ncp/check-flags", "--timeout=2m")
		reason := kubectl(t, c, "", "get", "-n", "kube-system", "ncp/check-flags", "-o", `jsonpath={.status.conditions[?(@.type=="Stalled")].reason}: {.status.conditions[?(@.type=="Stalled")].message}`)
		if !strings.HasPrefix(reason, "ShadowedByFlags: ") || !strings.Contains(reason, want) {
			t.Errorf("ncp/check-flags is Stalled with %q, want ShadowedByFlags naming %q", reason, want)
		}
		if after := nodeAssignment(t, c, f.Name); after != before {
			t.Errorf("node/%s's assignment changed under the pool: %q, was %q", f.Name, after, before)
		}
	})

	t.Run("an agent at another version fails", func(t *testing.T) {
		old := refs[0][:strings.LastIndex(refs[0], ":")] + ":v0.0.1"
		if err := c.TagImage(ctx, refs[0], "v0.0.1"); err != nil {
			t.Fatal(err)
		}
		kubectl(t, c, "", "-n", "kube-system", "set", "image", "daemonset/dkc-agent", "agent="+old)
		waitAgentPods(t, c, 3*time.Minute, func(p *corev1.Pod) bool {
			return p.Spec.Containers[0].Image == old && agentContainerReady(p)
		})
		r := dkc(t, c, "", "check")
		if r.ExitCode != 2 || !has(r, "✗", "agents", "agent at another version than", n.Name+" (v0.0.1)") {
			t.Errorf("check: exit %d, want 2 and ✗ agents naming %s (v0.0.1)", r.ExitCode, n.Name)
		}
	})

	t.Run("a deleted admission policy fails", func(t *testing.T) {
		const policy = "kubectl-dkc-node-assignment"
		adm := c.Client.AdmissionregistrationV1()
		if err := adm.ValidatingAdmissionPolicyBindings().Delete(ctx, policy, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := adm.ValidatingAdmissionPolicies().Delete(ctx, policy, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		var r result
		// The apiserver stops enforcing it once its informer saw the delete.
		waitFor(t, 30*time.Second, "check to find the forged write admitted", func() bool {
			r = dkc(t, c, "", "check")
			return has(r, "✗", "forged writes refused", "admitted: an assignment through node/")
		})
		if r.ExitCode != 2 || !has(r, "✗", "admission policies", "missing: "+policy) {
			t.Errorf("check: exit %d, want 2 and ✗ admission policies naming %s", r.ExitCode, policy)
		}
	})
}
