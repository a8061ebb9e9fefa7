package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// TestDeclaredFeatures proves on a kubelet v1.37 that what a node declares
// in status.declaredFeatures changes only with the assigner's opt-in:
//   - the node declares RestartAllContainersOnContainerExits (beta, on by
//     default), and a pod bound to it relies on it;
//   - a config that turns the gate off is refused, by assign --dry-run and
//     by the agent, before any restart, naming the feature and the pod,
//     even when the assignment allows the gate's own class (host-access);
//   - with --allow-unsafe=declared-features it applies, the node stops
//     declaring the feature, and the kubelet rejects a new pod that relies
//     on it, as dkc inferred;
//   - turning it back on is a declared-features change too.
func TestDeclaredFeatures(t *testing.T) {
	t.Parallel() // docs/development.md, "Tests in parallel"
	const feature = "RestartAllContainersOnContainerExits"
	c := framework.Setup(t, framework.Options{Nodes: 1})
	ctx := context.Background()
	n := c.Nodes[0]
	if _, err := n.StartAgent(framework.DKCBinary(), n.AgentArgs(framework.AgentOptions{
		Kubeconfig:    framework.AgentKubeconfig(t, c),
		HealthTimeout: 30 * time.Second,
		TrialDuration: 2 * time.Second,
	})); err != nil {
		t.Fatal(err)
	}
	createConfigMap(t, c, "df-base", nodeConfig(t, n, func(cfg map[string]any) { cfg["maxPods"] = 61 }))
	createConfigMap(t, c, "df-off", nodeConfig(t, n, func(cfg map[string]any) {
		cfg["maxPods"] = 62
		cfg["featureGates"] = map[string]any{feature: false}
	}))
	// Made now: nodeConfig reads the config the node runs.
	createConfigMap(t, c, "df-on", nodeConfig(t, n, func(cfg map[string]any) { cfg["maxPods"] = 63 }))
	mustDKC(t, c, "", "assign", n.Name, "--config", "df-base", "--wait", "--timeout", "2m")
	eventuallyStatus(t, c, n.Name, 30*time.Second, Active("df-base"), LKG("df-base"), NoError())
	declares := func() bool { return slices.Contains(readNode(t, c.Client, n.Name).Status.DeclaredFeatures, feature) }
	waitFor(t, 30*time.Second, "node/"+n.Name+" to declare "+feature, declares)

	// No controller manager runs: make the ServiceAccount that admission
	// wants for a pod.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "default"}}
	if _, err := c.Client.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pods := c.Client.CoreV1().Pods("default")
	createPod := func(t *testing.T, name string) {
		t.Helper()
		zero := int64(0)
		never := corev1.ContainerRestartPolicyNever
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{
				NodeName:                      n.Name,
				TerminationGracePeriodSeconds: &zero,
				Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/none:1", RestartPolicy: &never,
					RestartPolicyRules: []corev1.ContainerRestartRule{{
						Action:    corev1.ContainerRestartRuleActionRestartAllContainers,
						ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
					}}}},
			},
		}
		if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// refused assigns cm with allow, and checks that the agent refuses it
	// with want in its error, without a restart, on df-base still.
	refused := func(t *testing.T, cm, allow, want string) {
		t.Helper()
		pid, starts := n.KubeletPID(), n.KubeletStarts()
		r := dkc(t, c, "", "assign", n.Name, "--config", cm, allow, "--wait", "--timeout", "1m")
		if r.ExitCode != 2 {
			t.Errorf("assign %s: exit %d, want 2 (the node reported an error); stderr:\n%s", allow, r.ExitCode, r.Stderr)
		}
		st := eventuallyStatus(t, c, n.Name, 30*time.Second, Assigned(cm), AnyError())
		if !strings.Contains(st.Error, want) {
			t.Errorf("status.error = %q, want it to contain %q", st.Error, want)
		}
		wantCondition(t, c, n.Name, "False", "Refused")
		if n.KubeletPID() != pid || n.KubeletStarts() != starts {
			t.Errorf("kubelet restarted (PID %d -> %d, starts %d -> %d)", pid, n.KubeletPID(), starts, n.KubeletStarts())
		}
	}

	t.Run("turning a declared feature's gate off is refused, naming the pod that relies on it", func(t *testing.T) {
		createPod(t, "df-restart-all")
		const lost = `declaredFeatures "` + feature + `" -> "" (declared-features; relied on by running pods default/df-restart-all)`
		r := mustDKC(t, c, "", "assign", n.Name, "--config", "df-off", "--dry-run=server")
		if want := "Warning: node/" + n.Name + ` needs --allow-unsafe=host-access,declared-features, or its agent refuses the config (no --allow-unsafe given): it changes featureGates["` + feature + `"] "" -> "false" (host-access), ` + lost + "\n"; !strings.Contains(r.Stderr, want) {
			t.Errorf("assign --dry-run=server: stderr %q, want it to contain %q", r.Stderr, want)
		}
		refused(t, "df-off", "--allow-unsafe=host-access", lost+"; to allow it, assign again with --allow-unsafe=host-access,declared-features")
		if !declares() {
			t.Errorf("node/%s no longer declares %s after a refusal", n.Name, feature)
		}
	})

	t.Run("with the opt-in the node stops declaring it, and the kubelet rejects pods that need it", func(t *testing.T) {
		if err := pods.Delete(ctx, "df-restart-all", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		mustDKC(t, c, "", "assign", n.Name, "--config", "df-off", "--allow-unsafe=host-access,declared-features", "--wait", "--timeout", "2m")
		eventuallyStatus(t, c, n.Name, 30*time.Second, Active("df-off"), NoError())
		waitFor(t, 30*time.Second, "node/"+n.Name+" to stop declaring "+feature, func() bool { return !declares() })

		createPod(t, "df-late")
		var last *corev1.Pod
		waitFor(t, 30*time.Second, "the kubelet to reject pod df-late", func() bool {
			p, err := pods.Get(ctx, "df-late", metav1.GetOptions{})
			last = p
			return err == nil && p.Status.Phase == corev1.PodFailed
		})
		if last.Status.Reason != "PodFeatureUnsupported" || !strings.Contains(last.Status.Message, feature) {
			t.Errorf("pod df-late: reason %q, message %q; want PodFeatureUnsupported naming %s", last.Status.Reason, last.Status.Message, feature)
		}
	})

	t.Run("turning it back on is a declared-features change too", func(t *testing.T) {
		refused(t, "df-on", "--allow-unsafe=host-access", `declaredFeatures "" -> "`+feature+`" (declared-features); to allow it, assign again with --allow-unsafe=host-access,declared-features`)
		mustDKC(t, c, "", "assign", n.Name, "--config", "df-on", "--allow-unsafe=host-access,declared-features", "--wait", "--timeout", "2m")
		waitFor(t, 30*time.Second, "node/"+n.Name+" to declare "+feature+" again", declares)
	})
}
