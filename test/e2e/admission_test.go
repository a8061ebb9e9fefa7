package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// The start of deploy/admission-policy.yaml's messages for the assignment
// and its pin, and the pin's annotation.
const (
	policyMessage    = "only operators may assign configs"
	pinPolicyMessage = "only operators may pin configs"
	pinAnnotation    = "kubectl-dkc.io/config-pin"
)

// TestAdmissionPolicy applies deploy/admission-policy.yaml to a real 1.37
// apiserver and proves that a node's own credential can no longer add,
// change or remove its kubectl-dkc.io/config-source annotation (through
// nodes or nodes/status, nor register with one), while it can still write
// kubectl-dkc.io/config-status, the kubelet keeps reporting, the operator
// still assigns and resets, and the agent (on a token bound to its pod on
// the node) writes its status but cannot reassign either. TestPrivilege
// covers the file's other policy, the agent's confinement to its node.
func TestAdmissionPolicy(t *testing.T) {
	c := framework.Setup(t, framework.Options{Nodes: 1})
	ctx := context.Background()
	n := c.Nodes[0]
	nodeClient := nodeCredentialClient(t, c, 0)
	if err := c.ApplyManifest(ctx, filepath.Join("..", "..", "deploy", "rbac.yaml"), false); err != nil {
		t.Fatal(err)
	}
	// The agent as a DaemonSet pod on n runs it: with a token bound to its
	// pod, which deploy/admission-policy.yaml requires of the agent.
	pod, err := c.AgentPod(ctx, "dkc-agent-policy", n.Name)
	if err != nil {
		t.Fatal(err)
	}
	token, err := c.AgentToken(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	agentKubeconfig, err := c.TokenKubeconfig("agent-policy", token)
	if err != nil {
		t.Fatal(err)
	}
	agentClient := kubeconfigClient(t, agentKubeconfig)

	createConfigMap(t, c, "policy-a", string(n.DefaultKubeletConfig()))
	createConfigMap(t, c, "policy-b", string(n.DefaultKubeletConfig()))
	srcA := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: source.DefaultNamespace, Name: "policy-a", KubeletConfigKey: "kubelet"}}
	srcB := srcA.DeepCopy()
	srcB.ConfigMap.Name = "policy-b"
	// annotationPatch sets annotation key to value, or removes it for "".
	// assignPatch writes src in kubectl-dkc.io/config-source, as the
	// operator's assign does (nil: removes it).
	assignPatch := func(src *corev1.NodeConfigSource) []byte {
		t.Helper()
		if src == nil {
			return annotationPatch(t, source.AssignedAnnotation, "")
		}
		v, err := json.Marshal(src)
		if err != nil {
			t.Fatal(err)
		}
		return annotationPatch(t, source.AssignedAnnotation, string(v))
	}
	// pinJSON is a pin of srcA's reference to the bytes seed, as dkc
	// writes it (the policy kubectl-dkc-node-opt-in refuses other forms).
	pinJSON := func(seed string) string {
		t.Helper()
		v, err := json.Marshal(source.NewPin(srcA, []byte(seed), nil))
		if err != nil {
			t.Fatal(err)
		}
		return string(v)
	}
	pinPatch := func(seed string) []byte {
		t.Helper()
		if seed == "" {
			return annotationPatch(t, pinAnnotation, "")
		}
		return annotationPatch(t, pinAnnotation, pinJSON(seed))
	}
	// patchAs patches the Node (subresource "" or "status") with client.
	patchAs := func(client kubernetes.Interface, patch []byte, dryRun bool, subresource ...string) error {
		opts := metav1.PatchOptions{FieldManager: source.FieldManager}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		_, err := client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, opts, subresource...)
		return err
	}
	denied := func(err error) bool {
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), policyMessage)
	}

	t.Run("without the policy the node credential reassigns itself", func(t *testing.T) {
		if err := patchAs(nodeClient, assignPatch(srcA), true); err != nil {
			t.Fatalf("node %s changing its own %s (dry run): %v, want allowed before the policy", n.Name, source.AssignedAnnotation, err)
		}
	})

	if err := c.ApplyManifest(ctx, filepath.Join("..", "..", "deploy", "admission-policy.yaml"), false); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	var last error
	waitFor(t, 30*time.Second, "the policy to deny the node (dry run)", func() bool {
		last = patchAs(nodeClient, assignPatch(srcA), true)
		return denied(last)
	})
	t.Logf("policy effective %s after creation; the node is told: %v", time.Since(began).Round(time.Millisecond), last)

	t.Run("the node credential cannot add, change or remove its assignment", func(t *testing.T) {
		for _, sub := range []string{"", "status"} {
			var subs []string
			resource := "nodes"
			if sub != "" {
				subs, resource = []string{sub}, "nodes/"+sub
			}
			// Add, while none is assigned.
			if err := patchAs(nodeClient, assignPatch(srcA), false, subs...); !denied(err) {
				t.Errorf("node adding %s through %s: err %v, want Forbidden with %q", source.AssignedAnnotation, resource, err, policyMessage)
			}
		}
		mustDKC(t, c, "", "assign", n.Name, "--config", "policy-a")
		for _, sub := range []string{"", "status"} {
			var subs []string
			resource := "nodes"
			if sub != "" {
				subs, resource = []string{sub}, "nodes/"+sub
			}
			if err := patchAs(nodeClient, assignPatch(srcB), false, subs...); !denied(err) {
				t.Errorf("node changing %s through %s: err %v, want Forbidden with %q", source.AssignedAnnotation, resource, err, policyMessage)
			}
			if err := patchAs(nodeClient, assignPatch(nil), false, subs...); !denied(err) {
				t.Errorf("node removing %s through %s: err %v, want Forbidden with %q", source.AssignedAnnotation, resource, err, policyMessage)
			}
		}
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := source.Assigned(node)
		if err != nil {
			t.Fatal(err)
		}
		if got == nil || got.ConfigMap.Name != "policy-a" {
			t.Errorf("assignment after the node's attempts = %v, want policy-a, the operator's", got)
		}
		// Nor register a Node object that carries one: admission runs
		// before the apiserver finds the Node exists.
		_, err = nodeClient.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        n.Name,
			Annotations: map[string]string{source.AssignedAnnotation: `{"configMap":{"namespace":"kube-system","name":"policy-b","kubeletConfigKey":"kubelet"}}`},
		}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if !denied(err) {
			t.Errorf("node creating its Node with %s: err %v, want Forbidden with %q", source.AssignedAnnotation, err, policyMessage)
		}
	})

	t.Run("the node credential cannot add, change or remove the pin", func(t *testing.T) {
		pinDenied := func(err error) bool {
			return apierrors.IsForbidden(err) && strings.Contains(err.Error(), pinPolicyMessage)
		}
		for _, sub := range []string{"", "status"} {
			var subs []string
			resource := "nodes"
			if sub != "" {
				subs, resource = []string{sub}, "nodes/"+sub
			}
			if err := patchAs(nodeClient, pinPatch("a"), false, subs...); !pinDenied(err) {
				t.Errorf("node adding %s through %s: err %v, want Forbidden with %q", pinAnnotation, resource, err, pinPolicyMessage)
			}
		}
		// The operator pins, on the Node itself.
		if err := patchAs(c.Client, pinPatch("a"), false); err != nil {
			t.Fatalf("operator setting %s: %v", pinAnnotation, err)
		}
		for _, sub := range []string{"", "status"} {
			var subs []string
			resource := "nodes"
			if sub != "" {
				subs, resource = []string{sub}, "nodes/"+sub
			}
			if err := patchAs(nodeClient, pinPatch("b"), false, subs...); !pinDenied(err) {
				t.Errorf("node changing %s through %s: err %v, want Forbidden with %q", pinAnnotation, resource, err, pinPolicyMessage)
			}
			if err := patchAs(nodeClient, pinPatch(""), false, subs...); !pinDenied(err) {
				t.Errorf("node removing %s through %s: err %v, want Forbidden with %q", pinAnnotation, resource, err, pinPolicyMessage)
			}
			if err := patchAs(agentClient, pinPatch("b"), true, "status"); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), pinAnnotation) {
				t.Errorf("agent changing %s through nodes/status (dry run): err %v, want Forbidden naming it", pinAnnotation, err)
			}
		}
		if err := patchAs(c.Client, pinPatch("b"), true, "status"); !pinDenied(err) {
			t.Errorf("admin changing %s on nodes/status (dry run): %v, want the policy's denial: pins are made on the Node", pinAnnotation, err)
		}
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := node.Annotations[pinAnnotation]; got != pinJSON("a") {
			t.Errorf("%s after the node's attempts = %q, want the operator's", pinAnnotation, got)
		}
		_, err = nodeClient.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: n.Name, Annotations: map[string]string{pinAnnotation: pinJSON("c")},
		}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if !pinDenied(err) {
			t.Errorf("node creating its Node with %s: err %v, want Forbidden with %q", pinAnnotation, err, pinPolicyMessage)
		}
		if err := patchAs(c.Client, pinPatch(""), false); err != nil {
			t.Fatalf("operator removing %s: %v", pinAnnotation, err)
		}
	})

	t.Run("the node credential and the agent cannot write the rollout mark", func(t *testing.T) {
		// What undo sends a node back to is what a driver recorded: a node
		// that could forge its mark could choose its own undo.
		mark := []byte(`{"metadata":{"annotations":{"` + rollout.MarkAnnotation + `":"{\"rollout\":\"kube-system/x\",\"uid\":\"u\",\"started\":null}"}}}`)
		for _, sub := range []string{"", "status"} {
			var subs []string
			if sub != "" {
				subs = []string{sub}
			}
			if err := patchAs(nodeClient, mark, true, subs...); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "only a rollout's driver may mark a node") {
				t.Errorf("node writing %s (subresource %q, dry run): err %v, want Forbidden by the policy", rollout.MarkAnnotation, sub, err)
			}
		}
		if err := patchAs(agentClient, mark, true, "status"); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), rollout.MarkAnnotation) {
			t.Errorf("agent writing %s through nodes/status (dry run): err %v, want Forbidden naming it", rollout.MarkAnnotation, err)
		}
		if err := patchAs(c.Client, mark, true); err != nil {
			t.Errorf("operator writing %s (dry run): %v, want allowed", rollout.MarkAnnotation, err)
		}
	})

	t.Run("the node credential still writes its status", func(t *testing.T) {
		// As the agent does with the node's credential: nodes/status.
		writeStatusAsAgent(t, c, 0, &corev1.NodeConfigStatus{Assigned: srcA, Active: srcA})
		// Other annotations and labels on the Node itself.
		if err := patchAs(nodeClient, []byte(`{"metadata":{"annotations":{"`+source.Prefix+`e2e":"x"},"labels":{"`+source.Prefix+`e2e":"x"}}}`), false); err != nil {
			t.Errorf("node setting its own annotation and label %se2e: %v", source.Prefix, err)
		}
	})

	t.Run("the kubelet keeps registering and reporting", func(t *testing.T) {
		restartReports(t, c, n.Name, n.RestartKubelet)
		log, err := os.ReadFile(n.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(log), policyMessage) {
			t.Errorf("the kubelet's log shows the policy denying it")
		}
	})

	t.Run("the agent identity cannot reassign either", func(t *testing.T) {
		stPatch, err := source.StatusPatch(source.Annotation, &corev1.NodeConfigStatus{Assigned: srcA}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := patchAs(agentClient, stPatch, false, "status"); err != nil {
			t.Errorf("agent %s writing the status: %v", framework.AgentIdentity, err)
		}
		// deploy/rbac.yaml gives it no patch on nodes ...
		err = patchAs(agentClient, assignPatch(srcB), true)
		if !apierrors.IsForbidden(err) || strings.Contains(err.Error(), policyMessage) {
			t.Errorf("agent %s changing %s on nodes (dry run): %v, want RBAC's forbidden", framework.AgentIdentity, source.AssignedAnnotation, err)
		}
		// ... and the policies close nodes/status, for it as for everyone:
		// kubectl-dkc-node-assignment, and kubectl-dkc-agent-own-node,
		// which keeps the assigner's annotations from the agent (the
		// apiserver reports whichever denial it met first).
		if err := patchAs(agentClient, assignPatch(srcB), true, "status"); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), source.AssignedAnnotation) {
			t.Errorf("agent %s changing %s on nodes/status (dry run): %v, want the policies' denial", framework.AgentIdentity, source.AssignedAnnotation, err)
		}
		adminClient := c.Client
		if err := patchAs(adminClient, assignPatch(srcB), true, "status"); !denied(err) {
			t.Errorf("admin changing %s on nodes/status (dry run): %v, want the policy's denial: assignments are made on the Node", source.AssignedAnnotation, err)
		}
	})

	t.Run("the operator still assigns and resets", func(t *testing.T) {
		mustDKC(t, c, "", "assign", n.Name, "--config", "policy-b")
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, _, err := source.Assigned(node); err != nil || got == nil || got.ConfigMap.Name != "policy-b" {
			t.Errorf("assignment = %v (%v), want policy-b", got, err)
		}
		mustDKC(t, c, "", "reset", n.Name)
		node, err = c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := node.Annotations[source.AssignedAnnotation]; ok {
			t.Errorf("%s after reset = %q, want it removed", source.AssignedAnnotation, v)
		}
	})
}

// kubeconfigClient is a client from the kubeconfig file at path.
func kubeconfigClient(t *testing.T, path string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// restartReports restarts node's kubelet with restart, and waits until the
// new kubelet has posted its status (a Ready heartbeat later than the last
// one) and is Ready. A heartbeat has whole seconds: a kubelet that starts
// within the second of the last heartbeat posts an equal one, and its next
// only after nodeStatusReportFrequency (5m). So the restart waits for the
// next second, a limit of the resolution that no event announces.
func restartReports(t *testing.T, c *framework.Cluster, node string, restart func() error) {
	t.Helper()
	before := readyHeartbeat(t, c, node)
	time.Sleep(time.Until(before.Time.Add(time.Second)))
	if err := restart(); err != nil {
		t.Fatalf("restart the kubelet of %s: %v", node, err)
	}
	waitFor(t, time.Minute, "a Ready heartbeat of the restarted kubelet of "+node, func() bool {
		return readyHeartbeat(t, c, node).After(before.Time)
	})
	waitReady(t, c, node)
}

// readyHeartbeat is the lastHeartbeatTime of node's Ready condition.
func readyHeartbeat(t *testing.T, c *framework.Cluster, node string) metav1.Time {
	t.Helper()
	n, err := c.Client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.LastHeartbeatTime
		}
	}
	return metav1.Time{}
}
