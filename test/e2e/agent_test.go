package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/pkg/status"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// TestAgent runs `kubectl dkc agent` for the first of two real kubelets, as
// the identity of deploy/rbac.yaml, and walks the whole DKC loop: apply,
// trial, refusal, rollback, a ConfigMap it may not read or that does not
// exist, kill -9 in the middle of an apply, an unreachable apiserver, reset,
// and an operator's edit of the local config between two assignments. The
// second node must stay untouched. Each subtest sets up its own starting
// state (startFrom, startUnassigned, running), so that one runs alone with
// -run TestAgent/NAME; in order they find it already there.
func TestAgent(t *testing.T) {
	t.Parallel() // docs/development.md, "Tests in parallel"
	c := framework.Setup(t, framework.Options{Nodes: 2})
	ctx := context.Background()
	n, other := c.Nodes[0], c.Nodes[1]
	otherPID, otherStarts := other.KubeletPID(), other.KubeletStarts()

	kubeconfig := framework.AgentKubeconfig(t, c)
	unreachable := unreachableKubeconfig(t, kubeconfig)
	local, err := os.ReadFile(n.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	withPods := func(maxPods int, edit func(cfg map[string]any)) string {
		return nodeConfig(t, n, func(cfg map[string]any) {
			cfg["maxPods"] = maxPods
			if edit != nil {
				edit(cfg)
			}
		})
	}
	storeDir := n.AgentStoreDir()
	for name, maxPods := range map[string]int{"agent-a": 42, "agent-c": 44, "agent-d": 45, "agent-e": 46, "agent-m": 48} {
		createConfigMap(t, c, name, withPods(maxPods, nil))
	}
	// The cluster's Stop ends every agent the test started. ag is the
	// agent running now, started with agKubeconfig.
	var ag *framework.Agent
	var agKubeconfig string
	start := func(t *testing.T, kubeconfig string) {
		t.Helper()
		a, err := n.StartAgent(framework.DKCBinary(), n.AgentArgs(framework.AgentOptions{
			Kubeconfig:    kubeconfig,
			HealthTimeout: 20 * time.Second,
			TrialDuration: 5 * time.Second,
			Extra:         []string{"-v=2"},
		}))
		if err != nil {
			t.Fatal(err)
		}
		ag, agKubeconfig = a, kubeconfig
	}
	stop := func(t *testing.T) {
		t.Helper()
		if err := ag.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	// running is the starting state of every subtest: an agent that
	// reaches the apiserver.
	running := func(t *testing.T) {
		t.Helper()
		if ag.PID() != 0 && agKubeconfig == kubeconfig {
			return
		}
		stop(t)
		start(t, kubeconfig)
	}
	start(t, kubeconfig)

	t.Run("agent healthz", func(t *testing.T) {
		waitFor(t, 10*time.Second, "agent /healthz", func() bool {
			body, err := framework.HTTPGet("http://" + n.IP + ":10391/healthz")
			return err == nil && body == "ok"
		})
	})

	t.Run("apply maxPods", func(t *testing.T) {
		running(t)
		startUnassigned(t, c, n.Name, time.Minute)
		pid := n.KubeletPID()
		began := time.Now()
		mustDKC(t, c, "", "assign", n.Name, "--config", "agent-a")
		st := eventuallyStatus(t, c, n.Name, time.Minute, Active("agent-a"), NoError())
		t.Logf("assign to status active: %s", time.Since(began).Round(time.Millisecond))
		if st.Assigned.ConfigMap.UID == "" || st.Assigned.ConfigMap.ResourceVersion == "" {
			t.Errorf("status.assigned lacks uid or resourceVersion: %+v", st.Assigned.ConfigMap)
		}
		if n.KubeletPID() == pid {
			t.Errorf("kubelet PID %d unchanged: not restarted", pid)
		}
		if got := configz(t, c, n.Name)["maxPods"]; got != float64(42) {
			t.Errorf("configz maxPods %v, want 42", got)
		}
		waitFor(t, 30*time.Second, "capacity pods=42", func() bool {
			node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			return err == nil && node.Status.Capacity.Pods().Value() == 42
		})
		wantEvent(t, c, n.Name, "Applied")
	})

	t.Run("trial promotes to last-known-good", func(t *testing.T) {
		running(t)
		startFrom(t, c, n.Name, "agent-a", time.Minute)
		wantCondition(t, c, n.Name, "True", "Applied")
	})

	t.Run("payload without kind is refused, kubelet untouched", func(t *testing.T) {
		noKind := strings.Replace(withPods(50, nil), "kind: KubeletConfiguration\n", "", 1)
		if strings.Contains(noKind, "kind: KubeletConfiguration") {
			t.Fatalf("test payload still has a kind:\n%s", noKind)
		}
		createConfigMap(t, c, "agent-nokind", noKind)
		running(t)
		startFrom(t, c, n.Name, "agent-a", time.Minute)
		pid, starts := n.KubeletPID(), n.KubeletStarts()
		mustDKC(t, c, "", "assign", n.Name, "--config", "agent-nokind")
		st := eventuallyStatus(t, c, n.Name, 30*time.Second, Assigned("agent-nokind"), AnyError())
		const prefix = `failed to load config, see Kubelet log for details: missing "kind"`
		if !strings.HasPrefix(st.Error, prefix) {
			t.Errorf("status.error = %q, want prefix %q", st.Error, prefix)
		}
		if !framework.IsConfigMap(st.Active, "agent-a") || !framework.IsConfigMap(st.LastKnownGood, "agent-a") {
			t.Errorf("active %v, lastKnownGood %v; want agent-a for both", st.Active, st.LastKnownGood)
		}
		consistentlyNoRestart(t, "the refusal of agent-nokind", 2*time.Second, n.KubeletPID, n.KubeletStarts)
		if n.KubeletPID() != pid || n.KubeletStarts() != starts {
			t.Errorf("kubelet restarted (PID %d -> %d, starts %d -> %d)", pid, n.KubeletPID(), starts, n.KubeletStarts())
		}
		if got := configz(t, c, n.Name)["maxPods"]; got != float64(42) {
			t.Errorf("configz maxPods %v, want 42", got)
		}
		wantCondition(t, c, n.Name, "False", "Refused")
		wantEvent(t, c, n.Name, "Refused")
	})

	t.Run("config the kubelet refuses at start is rolled back", func(t *testing.T) {
		bad := withPods(51, func(cfg map[string]any) { cfg["containerRuntimeEndpoint"] = "unix:///nonexistent.sock" })
		createConfigMap(t, c, "agent-bad", bad)
		running(t)
		startFrom(t, c, n.Name, "agent-a", time.Minute)
		starts := n.KubeletStarts()
		began := time.Now()
		// The assigner allows the runtime endpoint's class (redirect),
		// which the agent refuses otherwise.
		mustDKC(t, c, "", "assign", n.Name, "--config", "agent-bad", "--allow-unsafe=redirect")
		st := eventuallyStatus(t, c, n.Name, 90*time.Second, Assigned("agent-bad"), AnyError())
		t.Logf("assign to rolled back: %s (health timeout 20s); error: %s", time.Since(began).Round(time.Millisecond), st.Error)
		if !strings.HasPrefix(st.Error, status.ValidateError+": ") {
			t.Errorf("status.error = %q, want prefix %q", st.Error, status.ValidateError+": ")
		}
		if !framework.IsConfigMap(st.Active, "agent-a") || !framework.IsConfigMap(st.LastKnownGood, "agent-a") {
			t.Errorf("active %v, lastKnownGood %v; want agent-a for both", st.Active, st.LastKnownGood)
		}
		if n.KubeletStarts() < starts+2 {
			t.Errorf("kubelet started %d times, want at least 2 (bad config, then rollback)", n.KubeletStarts()-starts)
		}
		if got := configz(t, c, n.Name)["maxPods"]; got != float64(42) {
			t.Errorf("configz maxPods %v after rollback, want 42", got)
		}
		waitReady(t, c, n.Name)
		wantCondition(t, c, n.Name, "False", "RolledBack")
		wantEvent(t, c, n.Name, "RolledBack")
	})

	t.Run("a ConfigMap the agent may not read shows in status, kubelet untouched", func(t *testing.T) {
		// rbac.yaml lets the agent read ConfigMaps in kube-system only.
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "agent-denied", Namespace: "default"},
			Data:       map[string]string{"kubelet": withPods(47, nil)},
		}
		if _, err := c.Client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		running(t)
		startFrom(t, c, n.Name, "agent-a", time.Minute)
		pid, starts := n.KubeletPID(), n.KubeletStarts()
		mustDKC(t, c, "", "assign", n.Name, "--config", "agent-denied", "-n", "default")
		const want = `failed to sync: failed to download config, see Kubelet log for details: configmaps "agent-denied" is forbidden: User "` +
			framework.AgentIdentity + `" cannot list resource "configmaps" in API group "" in the namespace "default"`
		st := eventuallyStatus(t, c, n.Name, 30*time.Second, ErrorContains("download"))
		if st.Error != want {
			t.Errorf("status.error = %q, want %q", st.Error, want)
		}
		if !framework.IsConfigMap(st.Active, "agent-a") || !framework.IsConfigMap(st.LastKnownGood, "agent-a") {
			t.Errorf("active %v, lastKnownGood %v; want agent-a for both", st.Active, st.LastKnownGood)
		}
		wantCondition(t, c, n.Name, "False", "Failed")
		wantEvent(t, c, n.Name, "Failed")
		// The informer retries at 0.8 s and 1.6 s: none restarts the kubelet.
		consistentlyNoRestart(t, "the download's retries", 3*time.Second, n.KubeletPID, n.KubeletStarts)
		if n.KubeletPID() != pid || n.KubeletStarts() != starts {
			t.Errorf("kubelet restarted (PID %d -> %d, starts %d -> %d)", pid, n.KubeletPID(), starts, n.KubeletStarts())
		}
		if got := configz(t, c, n.Name)["maxPods"]; got != float64(42) {
			t.Errorf("configz maxPods %v, want 42", got)
		}
		// One Event, not one per retry (the recorder would count repeats).
		events, err := c.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + n.Name + ",reason=Failed",
		})
		if err != nil {
			t.Fatal(err)
		}
		var count int32
		for _, ev := range events.Items {
			count += max(ev.Count, 1)
		}
		if count != 1 {
			t.Errorf("%d Failed events, want 1", count)
		}
	})

	t.Run("a missing ConfigMap shows in status; creating it converges", func(t *testing.T) {
		// kubectl dkc assign refuses a missing ConfigMap: write the
		// annotation as an operator's kubectl patch would.
		patch, err := source.AssignPatch(source.Annotation, &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
			Namespace: "kube-system", Name: "agent-missing", KubeletConfigKey: "kubelet",
		}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		running(t)
		startFrom(t, c, n.Name, "agent-a", time.Minute)
		pid, starts := n.KubeletPID(), n.KubeletStarts()
		if _, err := c.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		const want = "failed to sync: failed to download config, see Kubelet log for details: configmap kube-system/agent-missing not found"
		st := eventuallyStatus(t, c, n.Name, 30*time.Second, ErrorContains("not found"))
		if st.Error != want {
			t.Errorf("status.error = %q, want %q", st.Error, want)
		}
		if !framework.IsConfigMap(st.Active, "agent-a") {
			t.Errorf("active %v, want agent-a", st.Active)
		}
		wantCondition(t, c, n.Name, "False", "Failed")
		if n.KubeletPID() != pid || n.KubeletStarts() != starts {
			t.Errorf("kubelet restarted (PID %d -> %d, starts %d -> %d)", pid, n.KubeletPID(), starts, n.KubeletStarts())
		}

		// Once it exists and the operator assigns it (which pins its
		// bytes), the same agent applies it.
		began := time.Now()
		createConfigMap(t, c, "agent-missing", withPods(47, nil))
		mustDKC(t, c, "", "assign", n.Name, "--config", "agent-missing")
		eventuallyStatus(t, c, n.Name, time.Minute, Active("agent-missing"), NoError())
		t.Logf("create ConfigMap to status active: %s", time.Since(began).Round(time.Millisecond))
		if got := configz(t, c, n.Name)["maxPods"]; got != float64(47) {
			t.Errorf("configz maxPods %v, want 47", got)
		}
	})

	t.Run("kill -9 in the middle of an apply", func(t *testing.T) {
		running(t)
		// Any checkpointed last-known-good will do: the one before agent-c.
		if st := statusNow(t, c, n.Name); st == nil || st.LastKnownGood == nil || framework.IsConfigMap(st.Assigned, "agent-c") {
			startFrom(t, c, n.Name, "agent-a", time.Minute)
		}
		starts := n.KubeletStarts()
		mustDKC(t, c, "", "assign", n.Name, "--config", "agent-c")
		// Kill the agent as soon as it restarted the kubelet, before its
		// health gate can pass.
		waitFor(t, 30*time.Second, "the agent to restart the kubelet", func() bool { return n.KubeletStarts() > starts })
		if err := ag.Kill(); err != nil {
			t.Fatal(err)
		}

		store, st := openStore(t, storeDir, "the store after the kill")
		if !framework.IsConfigMap(st.Assigned, "agent-c") {
			t.Errorf("assigned = %v after the kill, want agent-c", st.Assigned)
		}
		if st.LastKnownGood == nil {
			t.Fatal("last-known-good is the local config, want a checkpoint")
		}
		for _, src := range []*corev1.NodeConfigSource{st.Assigned, st.LastKnownGood} {
			if _, err := store.LoadKey(src); err != nil {
				t.Errorf("checkpoint of %v: %v, want it in the store", src, err)
			}
		}
		onDisk, err := os.ReadFile(n.ConfigPath)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(onDisk), "maxPods: 44") {
			t.Errorf("kubelet config after the kill does not hold maxPods 44:\n%s", onDisk)
		}

		start(t, kubeconfig)
		eventuallyStatus(t, c, n.Name, time.Minute, Active("agent-c"), LKG("agent-c"), NoError())
		if got := configz(t, c, n.Name)["maxPods"]; got != float64(44) {
			t.Errorf("configz maxPods %v, want 44", got)
		}
	})

	t.Run("apiserver unreachable: the kubelet keeps the checkpointed config", func(t *testing.T) {
		running(t)
		startFrom(t, c, n.Name, "agent-c", time.Minute)
		stop(t)
		// Something put the local config back while the agent was away.
		if err := os.WriteFile(n.ConfigPath, local, 0o600); err != nil {
			t.Fatal(err)
		}
		starts := n.KubeletStarts()
		start(t, unreachable)
		waitFor(t, 30*time.Second, "the agent to restart the kubelet without the apiserver", func() bool { return n.KubeletStarts() > starts })
		waitFor(t, 30*time.Second, "configz maxPods 44", func() bool { return configz(t, c, n.Name)["maxPods"] == float64(44) })
		// A kubelet restart by someone else keeps it too.
		if err := n.RestartKubelet(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "configz maxPods 44 after a kubelet restart", func() bool { return configz(t, c, n.Name)["maxPods"] == float64(44) })
		stop(t)

		// A new assignment while the agent cannot see it, then the agent
		// with the right kubeconfig catches up.
		mustDKC(t, c, "", "assign", n.Name, "--config", "agent-d")
		start(t, kubeconfig)
		eventuallyStatus(t, c, n.Name, time.Minute, Active("agent-d"), NoError())
		if got := configz(t, c, n.Name)["maxPods"]; got != float64(45) {
			t.Errorf("configz maxPods %v, want 45", got)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		running(t)
		scrape := func() string {
			body, err := framework.HTTPGet("http://" + n.IP + ":10390/metrics")
			if err != nil {
				t.Fatal(err)
			}
			return body
		}
		next := "agent-m"
		if st := statusNow(t, c, n.Name); st != nil && framework.IsConfigMap(st.Assigned, next) {
			next = "agent-a"
		}
		before := scrape()
		mustDKC(t, c, "", "assign", n.Name, "--config", next)
		eventuallyStatus(t, c, n.Name, time.Minute, Active(next), NoError())
		after := scrape()
		for _, series := range []string{
			`dkc_agent_applies_total{result="applied"}`,
			"dkc_agent_apply_duration_seconds_count",
			`dkc_agent_phase_duration_seconds_count{phase="restart"}`,
		} {
			if d := metricValue(t, after, series) - metricValue(t, before, series); d != 1 {
				t.Errorf("%s went up by %v over one apply, want 1", series, d)
			}
		}
		for _, line := range strings.Split(after, "\n") {
			if strings.HasPrefix(line, "dkc_agent_phase_duration_seconds_sum") || strings.HasPrefix(line, "dkc_agent_apply_duration_seconds_sum") {
				t.Log(line)
			}
		}
	})

	t.Run("reset restores the local config", func(t *testing.T) {
		running(t)
		startAssigned(t, c, n.Name, "agent-a", time.Minute)
		mustDKC(t, c, "", "reset", n.Name)
		eventuallyStatus(t, c, n.Name, time.Minute, NoStatus())
		waitFor(t, 30*time.Second, "configz maxPods 110", func() bool { return configz(t, c, n.Name)["maxPods"] == float64(110) })
		onDisk, err := os.ReadFile(n.ConfigPath)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(onDisk, local) {
			t.Errorf("kubelet config after reset differs from the original:\n%s", onDisk)
		}
		wantCondition(t, c, n.Name, "True", "Reset")
		wantEvent(t, c, n.Name, "Reset")
	})

	t.Run("an operator's edit after a reset survives the next assign and reset", func(t *testing.T) {
		running(t)
		startUnassigned(t, c, n.Name, time.Minute)
		// The node runs its local config; the operator edits it.
		edited := withPods(111, nil)
		if err := os.WriteFile(n.ConfigPath, []byte(edited), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := n.RestartKubelet(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "configz maxPods 111", func() bool { return configz(t, c, n.Name)["maxPods"] == float64(111) })

		mustDKC(t, c, "", "assign", n.Name, "--config", "agent-e")
		eventuallyStatus(t, c, n.Name, time.Minute, Active("agent-e"), NoError())
		if got := configz(t, c, n.Name)["maxPods"]; got != float64(46) {
			t.Errorf("configz maxPods %v, want 46", got)
		}

		mustDKC(t, c, "", "reset", n.Name)
		eventuallyStatus(t, c, n.Name, time.Minute, NoStatus())
		waitFor(t, 30*time.Second, "configz maxPods 111, the operator's edit", func() bool {
			return configz(t, c, n.Name)["maxPods"] == float64(111)
		})
		onDisk, err := os.ReadFile(n.ConfigPath)
		if err != nil {
			t.Fatal(err)
		}
		if string(onDisk) != edited {
			t.Errorf("kubelet config after reset is not the operator's edit:\n%s", onDisk)
		}
	})

	t.Run("other node untouched", func(t *testing.T) {
		if other.KubeletPID() != otherPID || other.KubeletStarts() != otherStarts {
			t.Errorf("kubelet of %s restarted", other.Name)
		}
		if got := configz(t, c, other.Name)["maxPods"]; got != float64(110) {
			t.Errorf("configz maxPods %v on %s, want 110", got, other.Name)
		}
		node, err := c.Client.CoreV1().Nodes().Get(ctx, other.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := node.Annotations[source.StatusAnnotation]; ok {
			t.Errorf("%s has a config status", other.Name)
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == source.ConditionType {
				t.Errorf("%s has condition %s", other.Name, cond.Type)
			}
		}
	})

	stop(t)
}

// metricValue is the value of series (a metric's name and labels, as
// /metrics prints them) in body, a Prometheus text exposition; 0 when body
// has none.
func metricValue(t *testing.T, body, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// unreachableKubeconfig is kubeconfig with an apiserver address nothing
// listens on.
func unreachableKubeconfig(t *testing.T, kubeconfig string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range cfg.Clusters {
		cl.Server = "https://127.0.0.1:1"
	}
	path := kubeconfig + ".unreachable"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func createConfigMap(t *testing.T, c *framework.Cluster, name, payload string) {
	t.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
		Data:       map[string]string{"kubelet": payload},
	}
	if _, err := c.Client.CoreV1().ConfigMaps("kube-system").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func wantCondition(t *testing.T, c *framework.Cluster, node, status, reason string) {
	t.Helper()
	var got string
	waitFor(t, 15*time.Second, fmt.Sprintf("condition %s=%s reason %s", source.ConditionType, status, reason), func() bool {
		n, err := c.Client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == source.ConditionType {
				got = string(cond.Status) + " " + cond.Reason + ": " + cond.Message
				return string(cond.Status) == status && cond.Reason == reason
			}
		}
		return false
	})
	t.Logf("condition %s: %s", source.ConditionType, got)
}

func wantEvent(t *testing.T, c *framework.Cluster, node, reason string) {
	t.Helper()
	waitFor(t, 15*time.Second, "event "+reason+" on node "+node, func() bool {
		list, err := c.Client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node + ",reason=" + reason,
		})
		return err == nil && len(list.Items) > 0
	})
}

func waitReady(t *testing.T, c *framework.Cluster, node string) {
	t.Helper()
	waitFor(t, 30*time.Second, node+" Ready", func() bool {
		n, err := c.Client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		return err == nil && framework.IsReady(n)
	})
}
