package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// dkcImages are the OCI archives of the agent, controller and pause images:
// those of `make image` when $DKC_AGENT_IMAGE, $DKC_CONTROLLER_IMAGE and
// $DKC_PAUSE_IMAGE name them (make e2e does), else built from this
// repository for this host's platform.
func dkcImages(t *testing.T, root string) framework.Images {
	t.Helper()
	im := framework.Images{Agent: os.Getenv("DKC_AGENT_IMAGE"), Controller: os.Getenv("DKC_CONTROLLER_IMAGE"), Pause: os.Getenv("DKC_PAUSE_IMAGE")}
	if im.Agent != "" && im.Controller != "" && im.Pause != "" {
		return im
	}
	began := time.Now()
	im, err := framework.BuildImages(context.Background(), root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built the agent, controller and pause images in %s", time.Since(began).Round(time.Second))
	return im
}

// TestDaemonSet installs dkc as an operator would, from deploy/ with the
// test overlay test/deploy (kubectl apply --server-side -k), on real
// kubelets that pull the agent's, the controller's and the pause image from
// the cluster's registry on loopback, where the test pushed them as `make
// push` does. The agent then works in
// its pod: it applies an assigned config, restarts its own node's kubelet
// and outlives that restart, and a SIGKILL in the middle of an apply leaves
// a store from which the restarted container finishes the job. The
// controller's pods elect a leader, which drives a rollout that no CLI
// process follows.
func TestDaemonSet(t *testing.T) {
	c := framework.Setup(t, framework.Options{Nodes: 2, Pods: true})
	ctx := context.Background()
	root := filepath.Join("..", "..")
	images := dkcImages(t, root)
	began := time.Now()
	refs, err := c.PushImages(ctx, root, images.Agent, images.Controller, images.Pause)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pushed %s to the registry: %s", strings.Join(refs, ", "), time.Since(began).Round(time.Millisecond))
	refs = refs[:2] // the agent's and the controller's
	kubectl, err := framework.Kubectl()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("kustomizations pass server-side dry-run", func(t *testing.T) {
		for _, dir := range []string{filepath.Join(root, "deploy"), filepath.Join(root, "test", "deploy")} {
			out, err := exec.Command(kubectl, "--kubeconfig", c.Kubeconfig, "apply", "-k", dir, "--dry-run=server").CombinedOutput()
			if err != nil {
				t.Fatalf("kubectl apply -k %s --dry-run=server: %v\n%s", dir, err, out)
			}
			if !strings.Contains(string(out), "daemonset.apps/dkc-agent created (server dry run)") {
				t.Errorf("kubectl apply -k %s --dry-run=server did not create the DaemonSet:\n%s", dir, out)
			}
		}
	})

	began = time.Now()
	if _, err := c.DeployDKC(ctx, framework.Deploy{Overlay: filepath.Join(root, "test", "deploy"), Images: refs}); err != nil {
		t.Fatal(err)
	}
	pods := waitAgentPods(t, c, 2*time.Minute, func(p *corev1.Pod) bool { return agentContainerReady(p) })
	t.Logf("kubectl apply -k to %d agent pods Ready: %s", len(pods), time.Since(began).Round(time.Millisecond))
	t.Run("every node pulled the agent's image from the registry", func(t *testing.T) {
		for node, pod := range pods {
			t.Logf("node %s: %s", node, wantPulled(t, c, pod, refs[0]))
		}
	})

	n, other := c.Nodes[0], c.Nodes[1]
	before, otherBefore := pods[n.Name], pods[other.Name]
	local, err := os.ReadFile(n.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	withPods := func(maxPods int) string { return framework.ConfigWith(t, local, framework.MaxPods(maxPods)) }
	// The store, as the pod's hostPath /var/lib/kubectl-dkc: /var/lib is the
	// node's own varlib in its mount namespace.
	storeDir := filepath.Join(n.Dir, "varlib", "kubectl-dkc")

	t.Run("the agent in its pod applies an assigned config", func(t *testing.T) {
		createConfigMap(t, c, "ds-a", withPods(42))
		pid := n.KubeletPID()
		began := time.Now()
		mustDKC(t, c, "", "assign", n.Name, "--config", "ds-a")
		eventuallyStatus(t, c, n.Name, time.Minute, Active("ds-a"), NoError())
		t.Logf("assign to status active, agent in a pod: %s", time.Since(began).Round(time.Millisecond))
		if n.KubeletPID() == pid {
			t.Errorf("kubelet PID %d unchanged: the agent did not restart it", pid)
		}
		if got := configz(t, c, n.Name)["maxPods"]; got != float64(42) {
			t.Errorf("configz maxPods %v, want 42", got)
		}
		wantEvent(t, c, n.Name, "Applied")
		store, st := openStore(t, storeDir, "the pod's store")
		if !framework.IsConfigMap(st.Assigned, "ds-a") {
			t.Errorf("the pod's store at %s has assigned %v, want ds-a", storeDir, st.Assigned)
		}
		if _, err := store.LoadKey(st.Assigned); err != nil {
			t.Errorf("checkpoint of ds-a in the pod's store: %v", err)
		}
	})

	t.Run("the agent pod outlives its kubelet's restart", func(t *testing.T) {
		now := waitAgentPods(t, c, 30*time.Second, func(p *corev1.Pod) bool { return agentContainerReady(p) })
		for _, pair := range []struct{ before, after *corev1.Pod }{{before, now[n.Name]}, {otherBefore, now[other.Name]}} {
			b, a := agentStatus(pair.before), agentStatus(pair.after)
			if a.ContainerID != b.ContainerID || a.RestartCount != 0 {
				t.Errorf("pod %s: container %s, %d restarts; want the same container %s, 0 restarts",
					pair.after.Name, a.ContainerID, a.RestartCount, b.ContainerID)
			}
		}
	})

	t.Run("SIGKILL of the agent container during an apply", func(t *testing.T) {
		createConfigMap(t, c, "ds-b", withPods(44))
		cur := waitAgentPods(t, c, 30*time.Second, func(p *corev1.Pod) bool { return agentContainerReady(p) })[n.Name]
		restarts := agentStatus(cur).RestartCount
		id := strings.TrimPrefix(agentStatus(cur).ContainerID, "containerd://")
		pid, err := n.ContainerPID(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		starts := n.KubeletStarts()
		mustDKC(t, c, "", "assign", n.Name, "--config", "ds-b")
		// Kill the agent as soon as it restarted the kubelet, before its
		// health gate can pass.
		waitFor(t, 30*time.Second, "the agent to restart the kubelet", func() bool { return n.KubeletStarts() > starts })
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill -9 the agent container's process %d: %v", pid, err)
		}
		t.Logf("killed the agent (container %s, pid %d) during the apply", id[:12], pid)

		store, st := openStore(t, storeDir, "the store after the kill")
		if !framework.IsConfigMap(st.Assigned, "ds-b") {
			t.Errorf("assigned = %v after the kill, want ds-b", st.Assigned)
		}
		if _, err := store.LoadKey(st.Assigned); err != nil {
			t.Errorf("checkpoint of ds-b after the kill: %v, want it in the store", err)
		}
		onDisk, err := os.ReadFile(n.ConfigPath)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(onDisk), "maxPods: 44") {
			t.Errorf("kubelet config after the kill does not hold maxPods 44:\n%s", onDisk)
		}

		after := waitAgentPods(t, c, 2*time.Minute, func(p *corev1.Pod) bool {
			return p.Spec.NodeName != n.Name || (agentStatus(p).RestartCount > restarts && agentContainerReady(p))
		})[n.Name]
		if st := agentStatus(after); st.ContainerID == agentStatus(cur).ContainerID {
			t.Errorf("container %s still runs after kill -9", st.ContainerID)
		}
		if after.UID != cur.UID {
			t.Errorf("pod %s was replaced (uid %s, was %s); want its container restarted", after.Name, after.UID, cur.UID)
		}
		eventuallyStatus(t, c, n.Name, time.Minute, Active("ds-b"), NoError())
		if got := configz(t, c, n.Name)["maxPods"]; got != float64(44) {
			t.Errorf("configz maxPods %v, want 44", got)
		}
	})

	t.Run("the controller's pods elect a leader, which drives a rollout alone", func(t *testing.T) {
		t.Cleanup(func() {
			if t.Failed() {
				logPods(t, c, "app.kubernetes.io/name=dkc-controller")
			}
		})
		lead := waitLeader(t, c, 2*time.Minute, "")
		leader, err := c.Client.CoreV1().Pods("kube-system").Get(ctx, lead, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the lease holder %q is not a pod: %v", lead, err)
		}
		if leader.Labels["app.kubernetes.io/name"] != "dkc-controller" {
			t.Errorf("the lease holder %s is no controller pod: labels %v", lead, leader.Labels)
		}
		t.Logf("leader %s on %s: %s", lead, leader.Spec.NodeName, wantPulled(t, c, leader, refs[1]))
		createConfigMap(t, c, "ds-c", withPods(46))
		r := mustDKC(t, c, "", "rollout", "start", "--config", "ds-c", n.Name, "--name", "ds-c")
		if !strings.Contains(r.Stderr, "The controller "+lead+" drives rollout/ds-c") {
			t.Errorf("start did not name the leading pod %s: %q", lead, r.Stderr)
		}
		eventuallyStatus(t, c, n.Name, 2*time.Minute, Active("ds-c"), NoError())
		followToDone(t, c, "ds-c")
	})
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
		for _, n := range c.Nodes {
			if n.Name != p.Spec.NodeName {
				continue
			}
			logs, _ := filepath.Glob(filepath.Join(n.Dir, "pod-logs", "kube-system_"+p.Name+"_*", "*", "*.log"))
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
