package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// What the tests of deploy/ on kubeadm nodes share: the cluster and its
// images, and the agent and controller pods.

// kubeadmPodsCluster starts a control plane that kubeadm nodes join and
// that runs pods, and pushes dkc's images (dkcImages) to its registry, as
// `make push` does. It returns the cluster and the references of the
// agent's, the controller's and the probe pod's images there.
func kubeadmPodsCluster(t *testing.T) (*framework.Cluster, []string) {
	t.Helper()
	c := framework.Setup(t, framework.Options{ControlPlaneOnly: true, Kubeadm: true, Pods: true})
	images := dkcImages(t, filepath.Join("..", ".."))
	began := time.Now()
	refs, err := c.PushImages(context.Background(), filepath.Join("..", ".."), images.Agent, images.Controller, images.Probe, images.Pause)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pushed %s to the registry: %s", strings.Join(refs, ", "), time.Since(began).Round(time.Millisecond))
	return c, refs[:3]
}

// kubeadmDKC is kubeadmPodsCluster with one kubeadm node, named node,
// joined, and deploy/ installed as shipped: it returns once the node's
// agent runs and a controller leads. It returns the cluster, the images'
// references and the node.
func kubeadmDKC(t *testing.T, node string) (*framework.Cluster, []string, *framework.KubeadmNode) {
	t.Helper()
	c, refs := kubeadmPodsCluster(t)
	ctx := context.Background()
	n, err := c.StartKubeadmNodeWith(ctx, node, framework.KubeadmNodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeployDKC(ctx, framework.Deploy{Overlay: filepath.Join("..", "..", "deploy"), Images: refs}); err != nil {
		t.Fatal(err)
	}
	waitAgentPods(t, c, 2*time.Minute, agentContainerReady)
	waitLeader(t, c, 2*time.Minute, "")
	return c, refs, n
}

// dkcImages are the OCI archives of the agent, controller, probe and pause
// images: those of `make image` when $DKC_AGENT_IMAGE,
// $DKC_CONTROLLER_IMAGE, $DKC_PROBE_IMAGE and $DKC_PAUSE_IMAGE name them
// (make e2e does), else built from this repository for this host's
// platform.
func dkcImages(t *testing.T, root string) framework.Images {
	t.Helper()
	im := framework.Images{Agent: os.Getenv("DKC_AGENT_IMAGE"), Controller: os.Getenv("DKC_CONTROLLER_IMAGE"),
		Probe: os.Getenv("DKC_PROBE_IMAGE"), Pause: os.Getenv("DKC_PAUSE_IMAGE")}
	if im.Agent != "" && im.Controller != "" && im.Probe != "" && im.Pause != "" {
		return im
	}
	began := time.Now()
	im, err := framework.BuildImages(context.Background(), root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built the agent, controller, probe and pause images in %s", time.Since(began).Round(time.Second))
	return im
}

// waitAgentPods waits until there is one dkc-agent pod per node and cond
// holds for each, and returns them by node.
func waitAgentPods(t *testing.T, c *framework.Cluster, timeout time.Duration, cond func(*corev1.Pod) bool) map[string]*corev1.Pod {
	t.Helper()
	var byNode map[string]*corev1.Pod
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("agent pods: %s", last)
		}
	}()
	waitFor(t, timeout, "a dkc-agent pod per node", func() bool {
		list, err := c.Client.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=dkc-agent"})
		if err != nil {
			last = err.Error()
			return false
		}
		byNode = map[string]*corev1.Pod{}
		var states []string
		for i := range list.Items {
			p := &list.Items[i]
			byNode[p.Spec.NodeName] = p
			states = append(states, p.Name+"@"+p.Spec.NodeName+":"+string(p.Status.Phase))
		}
		last = strings.Join(states, " ")
		if len(byNode) != len(c.Nodes)+len(c.KubeadmNodes) {
			return false
		}
		for _, p := range byNode {
			if !cond(p) {
				return false
			}
		}
		return true
	})
	t.Logf("agent pods: %s", last)
	return byNode
}

func agentStatus(p *corev1.Pod) corev1.ContainerStatus {
	for _, st := range p.Status.ContainerStatuses {
		if st.Name == "agent" {
			return st
		}
	}
	return corev1.ContainerStatus{}
}

func agentContainerReady(p *corev1.Pod) bool {
	st := agentStatus(p)
	return p.Status.Phase == corev1.PodRunning && st.State.Running != nil && st.Ready
}

// logPods logs the pods of kube-system that selector selects, with their
// containers' states and the last lines of their logs, for a failure.
func logPods(t *testing.T, c *framework.Cluster, selector string) {
	t.Helper()
	list, err := c.Client.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Logf("list pods %s: %v", selector, err)
		return
	}
	for _, p := range list.Items {
		t.Logf("pod %s on %q: %s %s", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Message)
		for _, cond := range p.Status.Conditions {
			t.Logf("  condition %s=%s %s %s", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
		for _, cs := range p.Status.ContainerStatuses {
			t.Logf("  container %s: ready %v, restarts %d, state %+v, last %+v", cs.Name, cs.Ready, cs.RestartCount, cs.State, cs.LastTerminationState)
		}
		for _, n := range c.KubeadmNodes {
			if n.Name != p.Spec.NodeName {
				continue
			}
			logs, _ := filepath.Glob(n.Path(filepath.Join("/var/log/pods", "kube-system_"+p.Name+"_*", "*", "*.log")))
			for _, l := range logs {
				if b, err := os.ReadFile(l); err == nil {
					t.Logf("  %s:\n%s", l, framework.LastLines(string(b), 20))
				}
			}
		}
	}
}

// wantPulled waits for the kubelet's Pulled event of pod for image ref
// that says the kubelet pulled it ("Successfully pulled image"), not that
// it found it on the node ("already present on machine"), and returns the
// event's message, which says how long the pull took.
func wantPulled(t *testing.T, c *framework.Cluster, pod *corev1.Pod, ref string) string {
	t.Helper()
	var msg string
	waitFor(t, 30*time.Second, "event Pulled of "+ref+" for pod "+pod.Name, func() bool {
		list, err := c.Client.CoreV1().Events(pod.Namespace).List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + pod.Name + ",reason=Pulled",
		})
		if err != nil {
			return false
		}
		for _, e := range list.Items {
			if strings.HasPrefix(e.Message, `Successfully pulled image "`+ref+`"`) {
				msg = e.Message
				return true
			}
		}
		return false
	})
	return msg
}
