package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// TestKubeadmDaemonSet runs dkc as docs/install.md tells an operator to,
// on what an operator runs: nodes that `kubeadm join` set up under their
// own systemd (framework.StartKubeadmNodeWith), one with kubelet v1.37 and
// one with v1.34. dkc is installed with `kubectl apply --server-side -k` of
// a kustomization that names deploy/ and sets the images, nothing else, and
// the nodes pull the images from the cluster's registry. The agent restarts
// kubelet.service over its node's D-Bus, as deploy/ says, and the subtests
// are the agent's life on such a node: an apply, which the agent's pod
// outlives; a SIGKILL of the agent's container in the middle of an apply,
// after which the restarted container finishes the job; the rollback of a
// config the kubelet refuses; a podPidsLimit that only a pod created after
// the restart feels, rolled back by the new-pod check (deploy/'s probe
// pod); a `kubeadm upgrade node phase kubelet-config` that overwrites the assigned config (reported as drift, and put back once
// the agents run with --on-drift=reassert); and a reset to kubeadm's
// config. The controller's two pods, on the pod network, elect a leader,
// which drives a rollout that no CLI process follows.
func TestKubeadmDaemonSet(t *testing.T) {
	c, refs := kubeadmPodsCluster(t)
	ctx := context.Background()
	root := filepath.Join("..", "..")
	var nodes []*framework.KubeadmNode
	for _, k := range []struct{ name, binDir string }{
		{"dkc-kubeadm-137", ""},
		{"dkc-kubeadm-134", oldKubeletDir(t)},
	} {
		began := time.Now()
		n, err := c.StartKubeadmNodeWith(ctx, k.name, framework.KubeadmNodeOptions{KubeletBinDir: k.binDir})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("kubeadm node %s joined and Ready in %s", n.Name, time.Since(began).Round(time.Millisecond))
		nodes = append(nodes, n)
	}
	names := []string{nodes[0].Name, nodes[1].Name}
	// kubeadm's config.yaml as join wrote it: the node's local config.
	local := map[string][]byte{}
	for _, n := range nodes {
		b, err := os.ReadFile(n.Path("/var/lib/kubelet/config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		local[n.Name] = b
	}
	// Both nodes got the same config.yaml from the kubelet-config
	// ConfigMap, so one payload fits both.
	if !bytes.Equal(local[names[0]], local[names[1]]) {
		t.Fatalf("the two nodes' /var/lib/kubelet/config.yaml differ:\n%s\n---\n%s", local[names[0]], local[names[1]])
	}
	withPods := func(maxPods int, edit func(cfg map[string]any)) string {
		return framework.ConfigWith(t, local[names[0]], func(cfg map[string]any) {
			cfg["maxPods"] = maxPods
			if edit != nil {
				edit(cfg)
			}
		})
	}
	// assigned waits until every node runs the ConfigMap named cm, its
	// health gate passed.
	assigned := func(t *testing.T, cm string, maxPods int) {
		t.Helper()
		for _, name := range names {
			eventuallyStatus(t, c, name, 2*time.Minute, Active(cm), NoError())
			if got := configz(t, c, name)["maxPods"]; got != float64(maxPods) {
				t.Errorf("%s: configz maxPods %v, want %d", name, got, maxPods)
			}
		}
	}

	dir, err := c.DeployDKC(ctx, framework.Deploy{Overlay: filepath.Join(root, "deploy"), Images: refs})
	if err != nil {
		t.Fatal(err)
	}
	pods := waitAgentPods(t, c, 2*time.Minute, agentContainerReady)

	t.Run("the kustomization names deploy/ and sets the images, nothing else", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var k map[string]any
		if err := yaml.Unmarshal(b, &k); err != nil {
			t.Fatal(err)
		}
		for key := range k {
			if key != "apiVersion" && key != "kind" && key != "resources" && key != "images" {
				t.Errorf("the kustomization sets %s:\n%s", key, b)
			}
		}
		// The DaemonSet that runs is deploy/daemonset.yaml's, but for the
		// image.
		var shipped appsv1.DaemonSet
		raw, err := os.ReadFile(filepath.Join(root, "deploy", "daemonset.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(raw, &shipped); err != nil {
			t.Fatal(err)
		}
		live, err := c.Client.AppsV1().DaemonSets("kube-system").Get(ctx, "dkc-agent", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want, got := shipped.Spec.Template.Spec.Containers[0], live.Spec.Template.Spec.Containers[0]
		for _, e := range want.Env { // the apiserver's default
			if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.APIVersion == "" {
				e.ValueFrom.FieldRef.APIVersion = "v1"
			}
		}
		if got.Image != refs[0] {
			t.Errorf("the agent's image is %s, want %s", got.Image, refs[0])
		}
		if !reflect.DeepEqual(got.Args, want.Args) || !reflect.DeepEqual(got.VolumeMounts, want.VolumeMounts) || !reflect.DeepEqual(got.Env, want.Env) {
			t.Errorf("the running agent differs from deploy/daemonset.yaml:\nargs %q\nwant %q\nmounts %+v\nwant %+v\nenv %+v\nwant %+v",
				got.Args, want.Args, got.VolumeMounts, want.VolumeMounts, got.Env, want.Env)
		}
	})

	t.Run("every node pulled the agent's image from the registry", func(t *testing.T) {
		for node, pod := range pods {
			t.Logf("node %s: %s", node, wantPulled(t, c, pod, refs[0]))
		}
	})

	t.Run("the controller's pods reach the apiserver through the kubernetes Service and elect a leader, which drives a rollout alone", func(t *testing.T) {
		t.Cleanup(func() {
			if t.Failed() {
				logPods(t, c, "app.kubernetes.io/name=dkc-controller")
			}
		})
		lead := waitLeader(t, c, 2*time.Minute, "")
		pod, err := c.Client.CoreV1().Pods("kube-system").Get(ctx, lead, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the lease holder %q is not a pod: %v", lead, err)
		}
		if pod.Labels["app.kubernetes.io/name"] != "dkc-controller" {
			t.Errorf("the lease holder %s is no controller pod: labels %v", lead, pod.Labels)
		}
		if pod.Spec.HostNetwork {
			t.Errorf("controller pod %s runs in the node's network; deploy/ gives it a pod network", lead)
		}
		t.Logf("leader %s on %s, pod IP %s: %s", lead, pod.Spec.NodeName, pod.Status.PodIP, wantPulled(t, c, pod, refs[1]))

		// rollout start returns once the rollout exists: the leader drives
		// it, with no CLI process following it.
		createConfigMap(t, c, "kubeadm-r", withPods(41, nil))
		r := mustDKC(t, c, "", append([]string{"rollout", "start", "--config", "kubeadm-r", "--name", "kubeadm-r"}, names...)...)
		if !strings.Contains(r.Stderr, "The controller "+lead+" drives rollout/kubeadm-r") {
			t.Errorf("start did not name the leading pod %s: %q", lead, r.Stderr)
		}
		assigned(t, "kubeadm-r", 41)
		followToDone(t, c, "kubeadm-r")
	})

	t.Run("an assigned config is applied: kubelet.service restarted over D-Bus", func(t *testing.T) {
		createConfigMap(t, c, "kubeadm-a", withPods(42, nil))
		before := map[string]int{}
		for _, n := range nodes {
			if before[n.Name], err = n.KubeletMainPID(); err != nil {
				t.Fatal(err)
			}
		}
		began := time.Now()
		mustDKC(t, c, "", append([]string{"assign", "--config", "kubeadm-a"}, names...)...)
		assigned(t, "kubeadm-a", 42)
		t.Logf("assign to both nodes active: %s", time.Since(began).Round(time.Millisecond))
		for _, n := range nodes {
			if pid, _ := n.KubeletMainPID(); pid == before[n.Name] || pid == 0 {
				t.Errorf("%s: kubelet.service's MainPID %d, was %d: the agent did not restart it", n.Name, pid, before[n.Name])
			}
			onDisk, err := os.ReadFile(n.Path("/var/lib/kubelet/config.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(onDisk), "maxPods: 42") {
				t.Errorf("%s: /var/lib/kubelet/config.yaml lacks maxPods: 42:\n%s", n.Name, onDisk)
			}
			wantEvent(t, c, n.Name, "Applied")
		}
		// The agent's pod outlived the restart of the kubelet that runs it.
		now := waitAgentPods(t, c, 30*time.Second, agentContainerReady)
		for _, name := range names {
			b, a := agentStatus(pods[name]), agentStatus(now[name])
			if a.ContainerID != b.ContainerID || a.RestartCount != 0 {
				t.Errorf("%s: agent container %s, %d restarts; want the same container %s, 0 restarts", name, a.ContainerID, a.RestartCount, b.ContainerID)
			}
		}
	})

	t.Run("SIGKILL of the agent's container during an apply: the restarted container finishes it", func(t *testing.T) {
		n := nodes[0]
		createConfigMap(t, c, "kubeadm-kill", withPods(45, nil))
		cur := waitAgentPods(t, c, 30*time.Second, agentContainerReady)[n.Name]
		restarts := agentStatus(cur).RestartCount
		id := strings.TrimPrefix(agentStatus(cur).ContainerID, "containerd://")
		pid, err := n.KubeletMainPID()
		if err != nil {
			t.Fatal(err)
		}
		mustDKC(t, c, "", "assign", n.Name, "--config", "kubeadm-kill")
		// Kill the agent as soon as it restarted kubelet.service, before
		// its health gate can pass.
		waitFor(t, 30*time.Second, "the agent to restart kubelet.service", func() bool {
			now, err := n.KubeletMainPID()
			return err == nil && now != 0 && now != pid
		})
		if err := n.KillContainer(id); err != nil {
			t.Fatal(err)
		}
		t.Logf("killed the agent's container %s during the apply", id[:12])

		storeDir := n.Path("/var/lib/kubectl-dkc") // deploy/'s hostPath
		store, st := openStore(t, storeDir, "the store after the kill")
		if !framework.IsConfigMap(st.Assigned, "kubeadm-kill") {
			t.Errorf("assigned = %v after the kill, want kubeadm-kill", st.Assigned)
		}
		if _, err := store.LoadKey(st.Assigned); err != nil {
			t.Errorf("checkpoint of kubeadm-kill after the kill: %v, want it in the store", err)
		}
		onDisk, err := os.ReadFile(n.Path("/var/lib/kubelet/config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(onDisk), "maxPods: 45") {
			t.Errorf("kubelet config after the kill does not hold maxPods 45:\n%s", onDisk)
		}

		after := waitAgentPods(t, c, 2*time.Minute, func(p *corev1.Pod) bool {
			return p.Spec.NodeName != n.Name || (agentStatus(p).RestartCount > restarts && agentContainerReady(p))
		})[n.Name]
		if agentStatus(after).ContainerID == agentStatus(cur).ContainerID {
			t.Errorf("container %s still runs after the kill", agentStatus(after).ContainerID)
		}
		if after.UID != cur.UID {
			t.Errorf("pod %s was replaced (uid %s, was %s); want its container restarted", after.Name, after.UID, cur.UID)
		}
		eventuallyStatus(t, c, n.Name, time.Minute, Active("kubeadm-kill"), NoError())
		if got := configz(t, c, n.Name)["maxPods"]; got != float64(45) {
			t.Errorf("configz maxPods %v, want 45", got)
		}
	})

	t.Run("a config the kubelet refuses at start is rolled back to kubeadm's", func(t *testing.T) {
		// deploy/ gives a config a trial of 10 minutes before it becomes
		// last-known-good, so a config assigned just before is not: the
		// rollback goes to the local config, kubeadm's file.
		createConfigMap(t, c, "kubeadm-good", withPods(43, nil))
		mustDKC(t, c, "", append([]string{"assign", "--config", "kubeadm-good"}, names...)...)
		assigned(t, "kubeadm-good", 43)
		bad := withPods(51, func(cfg map[string]any) { cfg["containerRuntimeEndpoint"] = "unix:///nonexistent.sock" })
		createConfigMap(t, c, "kubeadm-bad", bad)
		began := time.Now()
		mustDKC(t, c, "", append([]string{"assign", "--config", "kubeadm-bad", "--allow-unsafe=redirect"}, names...)...)
		for _, n := range nodes {
			// deploy/ gives the health gate 2 minutes.
			st := eventuallyStatus(t, c, n.Name, 4*time.Minute, Assigned("kubeadm-bad"), AnyError())
			t.Logf("%s: assign to rolled back %s; error: %s", n.Name, time.Since(began).Round(time.Second), st.Error)
			if st.Active != nil || st.LastKnownGood != nil {
				t.Errorf("%s: active %v, lastKnownGood %v; want neither (the local config)", n.Name, st.Active, st.LastKnownGood)
			}
			if got := configz(t, c, n.Name)["maxPods"]; got != float64(110) {
				t.Errorf("%s: configz maxPods %v after the rollback, want kubeadm's 110", n.Name, got)
			}
			onDisk, err := os.ReadFile(n.Path("/var/lib/kubelet/config.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(onDisk, local[n.Name]) {
				t.Errorf("%s: /var/lib/kubelet/config.yaml after the rollback is not kubeadm's:\n%s", n.Name, onDisk)
			}
			waitReady(t, c, n.Name)
			wantCondition(t, c, n.Name, "False", "RolledBack")
		}
	})

	t.Run("podPidsLimit below what a new pod needs: the new-pod check rolls it back", func(t *testing.T) {
		// Every apply so far ran the new-pod check: the probe pod of
		// deploy/probe-pod.yaml ran and turned Ready before each restart.
		for _, name := range names {
			list, err := c.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{
				FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + name + ",reason=ProbePodUnavailable",
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range list.Items {
				t.Errorf("%s: Event ProbePodUnavailable: %s", name, e.Message)
			}
		}
		// The kubelet sets podPidsLimit on a pod's cgroup when it makes it
		// (cgroupsPerQOS, kubeadm's default): the pods that run keep theirs,
		// and the gate's look at them passes. The probe needs about 40
		// (8 processes of its own); 24 stops it at its fork.
		n := nodes[0]
		createConfigMap(t, c, "kubeadm-pids", withPods(47, func(cfg map[string]any) { cfg["podPidsLimit"] = 24 }))
		pid, err := n.KubeletMainPID()
		if err != nil {
			t.Fatal(err)
		}
		mustDKC(t, c, "", "assign", n.Name, "--config", "kubeadm-pids")
		st := eventuallyStatus(t, c, n.Name, 4*time.Minute, Assigned("kubeadm-pids"), AnyError())
		t.Logf("%s: error: %s", n.Name, st.Error)
		// The probe's own words (deploy/probe-pod.yaml's
		// FallbackToLogsOnError): it could not start its processes.
		for _, want := range []string{"new pod kube-system/dkc-probe-" + n.Name + " did not run", "start process"} {
			if !strings.Contains(st.Error, want) {
				t.Errorf("status.error = %q, want it to contain %q", st.Error, want)
			}
		}
		if strings.Contains(st.Error, "\n") {
			t.Errorf("status.error holds more than the probe's last line: %q", st.Error)
		}
		if st.Active != nil || st.LastKnownGood != nil {
			t.Errorf("active %v, lastKnownGood %v; want neither (the local config)", st.Active, st.LastKnownGood)
		}
		if now, _ := n.KubeletMainPID(); now == pid {
			t.Errorf("kubelet.service's MainPID is still %d: the config was never tried", pid)
		}
		cz := configz(t, c, n.Name)
		if got := cz["podPidsLimit"]; got == float64(24) {
			t.Errorf("configz podPidsLimit %v after the rollback; want the local config's", got)
		}
		if got := cz["maxPods"]; got != float64(110) {
			t.Errorf("configz maxPods %v after the rollback, want kubeadm's 110", got)
		}
		wantCondition(t, c, n.Name, "False", "RolledBack")
		if _, err := c.Client.CoreV1().Pods("kube-system").Get(ctx, "dkc-probe-"+n.Name, metav1.GetOptions{}); err == nil {
			t.Errorf("the probe pod dkc-probe-%s is left after the gate", n.Name)
		}
	})

	t.Run("kubeadm upgrade node phase kubelet-config: kubeadm's new file is drift; --on-drift=reassert puts the assignment back", func(t *testing.T) {
		createConfigMap(t, c, "kubeadm-c", withPods(44, nil))
		mustDKC(t, c, "", append([]string{"assign", "--config", "kubeadm-c"}, names...)...)
		assigned(t, "kubeadm-c", 44)
		n := nodes[0]
		// What an operator runs on a worker node in a kubeadm upgrade,
		// then restarts the kubelet, as kubeadm says to. (When kubeadm
		// writes the bytes of the local config again, the agent takes the
		// file for its own and re-applies the assignment at once, whatever
		// --on-drift says; docs/install.md.)
		upgrade := func(t *testing.T) {
			t.Helper()
			var out bytes.Buffer
			if err := n.Kubeadm(ctx, &out, "upgrade", "node", "phase", "kubelet-config", "--v=1"); err != nil {
				t.Fatalf("kubeadm upgrade node phase kubelet-config: %v\n%s", err, out.String())
			}
			t.Logf("kubeadm upgrade node phase kubelet-config:\n%s", framework.LastLines(out.String(), 2))
			if _, err := n.Systemd.Systemctl("restart", "kubelet.service"); err != nil {
				t.Fatal(err)
			}
		}

		// A new kubelet-config, uploaded by kubeadm as `kubeadm upgrade
		// apply` of a new version does: a file the agent never saw.
		if err := c.UploadKubeletConfig(ctx, framework.KubeadmKubeletConfig+"containerLogMaxFiles: 4\n"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := c.UploadKubeletConfig(ctx, framework.KubeadmKubeletConfig); err != nil {
				t.Errorf("restore kubelet-config: %v", err)
			}
		})
		upgrade(t)
		// deploy/'s agent checks the file every minute (--drift-check-interval).
		st := eventuallyStatus(t, c, n.Name, 2*time.Minute, ErrorPrefix("kubelet config drifted"))
		if st.Active != nil {
			t.Errorf("status names %v active while the kubelet runs kubeadm's file", st.Active)
		}
		wantCondition(t, c, n.Name, "False", "Drift")
		wantEvent(t, c, n.Name, "Drift")
		if cz := configz(t, c, n.Name); cz["maxPods"] != float64(110) || cz["containerLogMaxFiles"] != float64(4) {
			t.Errorf("configz maxPods %v, containerLogMaxFiles %v; want kubeadm's new file's 110 and 4 (--on-drift=report leaves it)", cz["maxPods"], cz["containerLogMaxFiles"])
		}

		// The operator chooses reassert: the agents restart with it and
		// put kubeadm-c back through the restart and the health gate.
		patch := `[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--on-drift=reassert"}]`
		kubectl(t, c, "", "-n", "kube-system", "patch", "daemonset", "dkc-agent", "--type=json", "-p", patch)
		began := time.Now()
		eventuallyStatus(t, c, n.Name, 3*time.Minute, Active("kubeadm-c"), NoError())
		t.Logf("DaemonSet patched to reassert: kubeadm-c active again after %s", time.Since(began).Round(time.Second))
		if got := configz(t, c, n.Name)["maxPods"]; got != float64(44) {
			t.Errorf("configz maxPods %v after the reassert, want 44", got)
		}
		waitAgentPods(t, c, 2*time.Minute, func(p *corev1.Pod) bool {
			return agentContainerReady(p) && strings.Contains(strings.Join(p.Spec.Containers[0].Args, " "), "--on-drift=reassert")
		})
	})

	t.Run("reset restores kubeadm's config", func(t *testing.T) {
		createConfigMap(t, c, "kubeadm-d", withPods(46, nil))
		mustDKC(t, c, "", append([]string{"assign", "--config", "kubeadm-d"}, names...)...)
		assigned(t, "kubeadm-d", 46)
		mustDKC(t, c, "", append([]string{"reset"}, names...)...)
		for _, n := range nodes {
			eventuallyStatus(t, c, n.Name, 2*time.Minute, NoStatus())
			waitFor(t, time.Minute, "configz maxPods 110", func() bool { return configz(t, c, n.Name)["maxPods"] == float64(110) })
			onDisk, err := os.ReadFile(n.Path("/var/lib/kubelet/config.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(onDisk, local[n.Name]) {
				t.Errorf("%s: /var/lib/kubelet/config.yaml after the reset differs from kubeadm's:\n%s\nwant:\n%s", n.Name, onDisk, local[n.Name])
			}
			wantCondition(t, c, n.Name, "True", "Reset")
		}
	})
}
