package agent

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The node re-checks what the assigner allowed: a featureGates change that
// takes a feature away from what the node declares is refused unless the
// pin allows declared-features, and the refusal names the running pods
// that rely on the feature, as the agent's slim copies of them say; a
// terminal pod is not named. With the opt-in the config applies.
func TestDeclaredFeaturesRefused(t *testing.T) {
	const (
		gateOff = `{` + header + `,"maxPods":110,"featureGates":{"RestartAllContainersOnContainerExits":false}}`
		refusal = `failed to validate config, see Kubelet log for details: refused unsafe change: ` +
			`featureGates["RestartAllContainersOnContainerExits"] "" -> "false" (host-access), ` +
			`declaredFeatures "RestartAllContainersOnContainerExits" -> "" (declared-features; relied on by running pods default/restart-all); ` +
			`to allow them, assign again with --allow-unsafe=host-access,declared-features`
	)
	tests := map[string]struct {
		allowUnsafe []string
		wantError   string
		wantRestart []string
	}{
		"without an opt-in": {
			wantError: refusal,
		},
		"with the gate's opt-in alone": {
			allowUnsafe: []string{"host-access"},
			wantError: `failed to validate config, see Kubelet log for details: refused unsafe change: ` +
				`declaredFeatures "RestartAllContainersOnContainerExits" -> "" (declared-features; relied on by running pods default/restart-all); ` +
				`to allow it, assign again with --allow-unsafe=host-access,declared-features`,
		},
		"with the opt-in": {
			allowUnsafe: []string{"host-access", "declared-features"},
			wantRestart: []string{"Restart"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			node := e.node(t)
			node.Status.DeclaredFeatures = []string{"ExtendWebSocketsToKubelet", "RestartAllContainersOnContainerExits"}
			if _, err := e.client.CoreV1().Nodes().UpdateStatus(context.Background(), node, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			failed := restartAllPod("done")
			failed.Status.Phase = corev1.PodFailed
			e.pods.list = slim(t, restartAllPod("restart-all"), failed, runningPod("plain", false))
			e.configMap(t, "a", gateOff, nil)
			e.assign(t, "a", tc.allowUnsafe...)

			e.sync(t)

			diff(t, "status error", tc.wantError, e.status(t).Error)
			diff(t, "restarter calls", tc.wantRestart, e.restart.CallsSnapshot())
		})
	}
}

// restartAllPod is a pending pod default/NAME whose container's rule
// restarts all its containers: it relies on the declared feature
// RestartAllContainersOnContainerExits.
func restartAllPod(name string) *corev1.Pod {
	never := corev1.ContainerRestartPolicyNever
	p := runningPod(name, false)
	p.Status.Phase = corev1.PodPending
	p.Spec.Containers = []corev1.Container{{Name: "c", RestartPolicy: &never, RestartPolicyRules: []corev1.ContainerRestartRule{{
		Action:    corev1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
	}}}}
	return p
}

// slim returns the agent's slim copies of pods, as its informer keeps them.
func slim(t *testing.T, pods ...*corev1.Pod) []*corev1.Pod {
	t.Helper()
	out := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		s, err := slimPod(p)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = s.(*corev1.Pod)
	}
	return out
}
