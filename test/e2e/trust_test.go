package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// TestTrust proves on a real kubelet, the newest and the oldest the tests
// run, that the assigner decides what a node runs and the ConfigMap only
// carries bytes:
//   - payloads that would hand the node to the config's author, or take it
//     down, each stored as a raw ConfigMap and assigned, are refused before
//     any restart, and the node stays Ready on its previous config;
//   - a refusal of 20 000 feature gates, too big for the Node's
//     annotations as it stands, reaches status bounded: its first fields,
//     how many more, and the flag that allows them;
//   - an in-place edit of an assigned ConfigMap does not reach the kubelet,
//     and assigning again applies it;
//   - a payload applies with the --allow-unsafe its refusal named, while a
//     ConfigMap annotated allow-unsafe=* is still refused.
func TestTrust(t *testing.T) {
	t.Parallel() // docs/development.md, "Tests in parallel"
	for _, tc := range []struct {
		name   string
		binDir func(t *testing.T) string
	}{
		{name: "kubelet v1.37", binDir: func(*testing.T) string { return "" }},
		{name: "kubelet v1.34", binDir: oldKubeletDir},
	} {
		t.Run(tc.name, func(t *testing.T) { testTrust(t, tc.binDir(t)) })
	}
}

func testTrust(t *testing.T, kubeletBinDir string) {
	c := framework.Setup(t, framework.Options{Nodes: 1, KubeletBinDir: kubeletBinDir})
	ctx := context.Background()
	n := c.Nodes[0]
	kubeconfig := framework.AgentKubeconfig(t, c)
	payload := func(edit func(cfg map[string]any)) string { return nodeConfig(t, n, edit) }
	maxPods := func(v int) func(map[string]any) { return func(cfg map[string]any) { cfg["maxPods"] = v } }
	if _, err := n.StartAgent(framework.DKCBinary(), n.AgentArgs(framework.AgentOptions{
		Kubeconfig:    kubeconfig,
		HealthTimeout: 30 * time.Second,
		TrialDuration: 2 * time.Second,
	})); err != nil {
		t.Fatal(err)
	}
	// onGood puts the node on a config of its own, applied and
	// last-known-good: the starting state of each subtest.
	onGood := func(t *testing.T, name string, pods int) {
		t.Helper()
		createConfigMap(t, c, name, payload(maxPods(pods)))
		mustDKC(t, c, "", "assign", n.Name, "--config", name, "--wait", "--timeout", "2m")
		eventuallyStatus(t, c, n.Name, 30*time.Second, Active(name), LKG(name), NoError())
	}
	// refused assigns ConfigMap name and checks that the agent refuses it
	// with want in its error and condition reason, without a restart,
	// with good still active and the node Ready.
	refused := func(t *testing.T, name, good, reason, want string, assignArgs ...string) {
		t.Helper()
		pid, starts := n.KubeletPID(), n.KubeletStarts()
		r := dkc(t, c, "", append([]string{"assign", n.Name, "--config", name, "--wait", "--timeout", "1m"}, assignArgs...)...)
		if r.ExitCode != 2 {
			t.Errorf("assign --wait: exit %d, want 2 (the node reported an error); stderr:\n%s", r.ExitCode, r.Stderr)
		}
		st := eventuallyStatus(t, c, n.Name, 30*time.Second, Assigned(name), AnyError())
		if !strings.Contains(st.Error, want) {
			t.Errorf("status.error = %q, want it to contain %q", st.Error, want)
		}
		if !framework.IsConfigMap(st.Active, good) {
			t.Errorf("active %v, want %s", st.Active, good)
		}
		wantCondition(t, c, n.Name, "False", reason)
		if n.KubeletPID() != pid || n.KubeletStarts() != starts {
			t.Errorf("kubelet restarted (PID %d -> %d, starts %d -> %d)", pid, n.KubeletPID(), starts, n.KubeletStarts())
		}
		waitReady(t, c, n.Name)
	}

	t.Run("escalation and outage payloads are refused before any restart", func(t *testing.T) {
		onGood(t, "trust-good", 61)
		for _, p := range []struct {
			name, want string
			edit       func(cfg map[string]any)
		}{
			{"static-pod-url", `staticPodURL "" -> "http://198.51.100.9/pods.yaml" (host-access)`, func(cfg map[string]any) { cfg["staticPodURL"] = "http://198.51.100.9/pods.yaml" }},
			{"static-pod-path", `(host-access)`, func(cfg map[string]any) { cfg["staticPodPath"] = "/tmp/dkc-evil-manifests" }},
			{"volume-plugin-dir", `volumePluginDir`, func(cfg map[string]any) { cfg["volumePluginDir"] = "/tmp/dkc-evil-plugins" }},
			{"runtime-endpoint", `containerRuntimeEndpoint`, func(cfg map[string]any) { cfg["containerRuntimeEndpoint"] = "unix:///tmp/dkc-evil.sock" }},
			{"client-ca", `authentication.x509.clientCAFile`, func(cfg map[string]any) {
				cfg["authentication"].(map[string]any)["x509"] = map[string]any{"clientCAFile": "/tmp/dkc-evil-ca.crt"}
			}},
			{"always-allow", `authorization.mode "Webhook" -> "AlwaysAllow" (security)`, func(cfg map[string]any) {
				cfg["authorization"] = map[string]any{"mode": "AlwaysAllow"}
			}},
			{"cluster-dns", `clusterDNS`, func(cfg map[string]any) { cfg["clusterDNS"] = []any{"198.51.100.53"} }},
			{"eviction-everything", `cannot be right on this node: evictionHard`, func(cfg map[string]any) {
				cfg["evictionHard"] = map[string]any{"memory.available": "100%"}
			}},
			{"eviction-crossed-now", `evictionHard["nodefs.available"] 99% (the node has `, func(cfg map[string]any) {
				cfg["evictionHard"] = map[string]any{"nodefs.available": "99%", "memory.available": "1Mi"}
			}},
			{"lease-an-hour", `cannot be right on this node: nodeLeaseDurationSeconds`, func(cfg map[string]any) { cfg["nodeLeaseDurationSeconds"] = 3600 }},
			// Renewed every 49.75s: with 4% jitter, past the 50s grace
			// after one failed renewal.
			{"lease-199", `cannot be right on this node: nodeLeaseDurationSeconds 199 (`, func(cfg map[string]any) { cfg["nodeLeaseDurationSeconds"] = 199 }},
			{"pids-1", `cannot be right on this node: podPidsLimit 1 (below 16`, func(cfg map[string]any) { cfg["podPidsLimit"] = 1 }},
			{"verbosity-8", `logging.verbosity "" -> "8" (security)`, func(cfg map[string]any) { cfg["logging"] = map[string]any{"verbosity": 8} }},
			{"no-hard-eviction", `evictionHard["memory.available"] "1Mi" -> "" (isolation)`, func(cfg map[string]any) { cfg["evictionHard"] = map[string]any{} }},
			{"no-cfs-quota", `cpuCFSQuota "" -> "false" (isolation)`, func(cfg map[string]any) { cfg["cpuCFSQuota"] = false }},
			{"tracing-on", `tracing "" -> "{}" (redirect)`, func(cfg map[string]any) { cfg["tracing"] = map[string]any{} }},
		} {
			t.Run(p.name, func(t *testing.T) {
				name := "trust-" + p.name
				createConfigMap(t, c, name, payload(p.edit))
				refused(t, name, "trust-good", "Refused", p.want)
			})
		}
	})

	t.Run("a refusal of any size reaches status", func(t *testing.T) {
		onGood(t, "trust-small", 66)
		gates := map[string]any{}
		for i := range 20000 {
			gates[fmt.Sprintf("DKCTestGate%05d", i)] = true
		}
		createConfigMap(t, c, "trust-gates", payload(func(cfg map[string]any) { cfg["featureGates"] = gates }))
		const want = " more; to allow them, assign again with --allow-unsafe=host-access"
		refused(t, "trust-gates", "trust-small", "Refused", want)
		wantEvent(t, c, n.Name, "Refused")
		// status exits 2 when a node reports an error, and prints it.
		r := dkc(t, c, "", "status", n.Name, "-o", "json")
		if r.ExitCode != 2 {
			t.Errorf("status: exit %d, want 2 (the node reported an error); stderr:\n%.2000s", r.ExitCode, r.Stderr)
		}
		if !strings.Contains(r.Stdout, `featureGates[\"DKCTestGate00000\"]`) || !strings.Contains(r.Stdout, want) {
			t.Errorf("kubectl dkc status does not show the bounded refusal:\n%.2000s", r.Stdout)
		}
	})

	t.Run("an in-place edit does not reach the kubelet; assigning again applies it", func(t *testing.T) {
		onGood(t, "trust-pinned", 62)
		pid := n.KubeletPID()
		cms := c.Client.CoreV1().ConfigMaps("kube-system")
		cm, err := cms.Get(ctx, "trust-pinned", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["kubelet"] = payload(maxPods(63))
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		st := eventuallyStatus(t, c, n.Name, 30*time.Second, ErrorContains("but the assignment pins"))
		if !strings.Contains(st.Error, source.Digest([]byte(payload(maxPods(62))))) || !strings.Contains(st.Error, source.Digest([]byte(payload(maxPods(63))))) {
			t.Errorf("status.error = %q, want both digests", st.Error)
		}
		wantCondition(t, c, n.Name, "False", "PinMismatch")
		wantEvent(t, c, n.Name, "PinMismatch")
		if got := configz(t, c, n.Name)["maxPods"]; got != float64(62) || n.KubeletPID() != pid {
			t.Errorf("configz maxPods %v, kubelet PID %d -> %d; want 62 and no restart", got, pid, n.KubeletPID())
		}

		mustDKC(t, c, "", "assign", n.Name, "--config", "trust-pinned", "--wait", "--timeout", "2m")
		if got := configz(t, c, n.Name)["maxPods"]; got != float64(63) {
			t.Errorf("configz maxPods %v after assigning again, want 63", got)
		}
	})

	t.Run("the opt-in is the assigner's, not the ConfigMap's", func(t *testing.T) {
		onGood(t, "trust-base", 64)
		// A security-class change that is harmless on a test node.
		optIn := payload(func(cfg map[string]any) {
			cfg["maxPods"] = 65
			cfg["authentication"].(map[string]any)["webhook"] = map[string]any{"enabled": true, "cacheTTL": "17s"}
		})
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "trust-optin", Namespace: "kube-system",
				Annotations: map[string]string{source.AllowUnsafeAnnotation: "*"}},
			Data: map[string]string{"kubelet": optIn},
		}
		if _, err := c.Client.CoreV1().ConfigMaps("kube-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		refused(t, "trust-optin", "trust-base", "Refused", "--allow-unsafe=security")
		wantEvent(t, c, n.Name, "IgnoredAnnotation")

		mustDKC(t, c, "", "assign", n.Name, "--config", "trust-optin", "--allow-unsafe=security", "--wait", "--timeout", "2m")
		cz := configz(t, c, n.Name)
		webhook, _ := cz["authentication"].(map[string]any)["webhook"].(map[string]any)
		if cz["maxPods"] != float64(65) || webhook["cacheTTL"] != "17s" {
			t.Errorf("configz maxPods %v, authentication.webhook %v; want 65 and cacheTTL 17s", cz["maxPods"], webhook)
		}
		r := mustDKC(t, c, "", "status", n.Name, "-o", "wide")
		if !strings.Contains(r.Stdout, "allow-unsafe=security") {
			t.Errorf("status -o wide does not show the pin's classes:\n%s", r.Stdout)
		}
	})

	// A snapshot holds the node's own paths and endpoints: push says
	// nothing about opt-ins, and assign --dry-run, which compares the config
	// with what the kubelet runs, names none, so the snapshot assigned back
	// applies without one. Moving the static pod path names exactly
	// host-access, and the flag that allows it.
	t.Run("a snapshot needs no opt-in on its own node; dry-run names only what changes", func(t *testing.T) {
		onGood(t, "trust-snapbase", 66)
		dir := t.TempDir()
		snapshot := mustDKC(t, c, "", "snapshot", n.Name).Stdout
		pushed := func(t *testing.T, name, cfg string) string {
			t.Helper()
			file := filepath.Join(dir, name+".json")
			if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			r := mustDKC(t, c, "", "push", file, "--name", name, "-o", "name")
			if strings.Contains(r.Stderr, "allow-unsafe") {
				t.Errorf("push %s suggests an opt-in, which it cannot judge without a node:\n%s", name, r.Stderr)
			}
			return strings.TrimSpace(r.Stdout)
		}
		own := pushed(t, "trust-snapshot", snapshot)
		r := mustDKC(t, c, "", "assign", n.Name, "--config", own, "--dry-run=server")
		if want := "node/" + n.Name + " needs no --allow-unsafe: the config changes no field of a class that needs one\n"; r.Stderr != want {
			t.Errorf("assign --dry-run=server of the node's own snapshot: stderr %q, want %q", r.Stderr, want)
		}
		mustDKC(t, c, "", "assign", n.Name, "--config", own, "--wait", "--timeout", "2m")
		eventuallyStatus(t, c, n.Name, 30*time.Second, Active(strings.TrimPrefix(own, "configmap/")), NoError())

		var cfg map[string]any
		if err := json.Unmarshal([]byte(snapshot), &cfg); err != nil {
			t.Fatal(err)
		}
		old, _ := cfg["staticPodPath"].(string)
		cfg["staticPodPath"] = "/tmp/dkc-moved-manifests"
		cfg["maxPods"] = 67
		moved, err := json.MarshalIndent(cfg, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		other := pushed(t, "trust-moved", string(moved))
		for _, dryRun := range []string{"--dry-run=server", "--dry-run=client"} {
			r = mustDKC(t, c, "", "assign", n.Name, "--config", other, dryRun, "--carrier=annotation")
			want := fmt.Sprintf("Warning: node/%s needs --allow-unsafe=host-access, or its agent refuses the config (no --allow-unsafe given): it changes staticPodPath %q -> %q (host-access)\n",
				n.Name, old, "/tmp/dkc-moved-manifests")
			if r.Stderr != want {
				t.Errorf("assign %s of a moved static pod path: stderr %q, want %q", dryRun, r.Stderr, want)
			}
		}
		r = mustDKC(t, c, "", "assign", n.Name, "--config", other, "--dry-run=server", "--allow-unsafe=host-access,redirect")
		want := fmt.Sprintf("node/%s needs --allow-unsafe=host-access: it changes staticPodPath %q -> %q (host-access)\n", n.Name, old, "/tmp/dkc-moved-manifests") +
			"Warning: --allow-unsafe allows redirect, which the config changes on none of these nodes: leave it out\n"
		if r.Stderr != want {
			t.Errorf("assign --dry-run=server --allow-unsafe=host-access,redirect: stderr %q, want %q", r.Stderr, want)
		}
	})
}
