package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dkc/dkc/pkg/status"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// skewKubeletVersion is the oldest kubelet the version skew policy lets run
// under the v1.37 apiserver; hack/build-components-v1.34.sh builds it.
const skewKubeletVersion = "v1.34.12"

// skewKubeletBinDir is where hack/build-components-v1.34.sh puts it:
// $DKC_V134_BIN_DIR, else next to the v1.37.2 components.
func skewKubeletBinDir() string {
	if d := os.Getenv("DKC_V134_BIN_DIR"); d != "" {
		return d
	}
	return filepath.Join(filepath.Dir(framework.DefaultBinDir()), skewKubeletVersion)
}

// oldKubeletDir is skewKubeletBinDir, once it holds the kubelet; without
// it the test fails in CI and is skipped elsewhere.
func oldKubeletDir(t *testing.T) string {
	t.Helper()
	return framework.RequireBinaries(t, skewKubeletBinDir(), "components-v1.34", "kubelet")
}

// TestKubeletSkew runs the agent against kubelets v1.34 under the v1.37.2
// control plane: node 0 in replace mode, node 1 in drop-in mode. Kubelet
// 1.34 differs where the agent looks: its /configz has no kind/apiVersion,
// its --config-dir (KubeletConfigDropInDir) is beta, and its
// fine-grained authorization (nodes/configz, nodes/healthz) is beta.
// The subtests cover apply, the health gate's rollback, drop-in mode and
// reset, and the snapshot of a 1.34 configz.
func TestKubeletSkew(t *testing.T) {
	t.Parallel() // docs/development.md, "Tests in parallel"
	binDir := oldKubeletDir(t)
	c := framework.Setup(t, framework.Options{Nodes: 2, KubeletBinDir: binDir})
	ctx := context.Background()
	replace, dropin := c.Nodes[0], c.Nodes[1]

	node, err := c.Client.CoreV1().Nodes().Get(ctx, replace.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := node.Status.NodeInfo.KubeletVersion; got != skewKubeletVersion {
		t.Fatalf("node %s runs kubelet %s, want %s", replace.Name, got, skewKubeletVersion)
	}
	if err := c.ApplyManifest(ctx, filepath.Join("..", "..", "deploy", "rbac.yaml"), false); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := c.UserKubeconfig(framework.AgentIdentity)
	if err != nil {
		t.Fatal(err)
	}
	// Each node's own config, as the harness wrote it.
	local := map[string][]byte{}
	for _, n := range c.Nodes {
		if local[n.Name], err = os.ReadFile(n.ConfigPath); err != nil {
			t.Fatal(err)
		}
	}
	withPods := func(n *framework.Node, maxPods int, edit func(cfg map[string]any)) string {
		return framework.ConfigWith(t, local[n.Name], func(cfg map[string]any) {
			cfg["maxPods"] = maxPods
			if edit != nil {
				edit(cfg)
			}
		})
	}
	for _, n := range []struct {
		node *framework.Node
		mode string
	}{{replace, "replace"}, {dropin, "dropin"}} {
		if _, err := n.node.StartAgent(framework.DKCBinary(), n.node.AgentArgs(framework.AgentOptions{
			Kubeconfig:    kubeconfig,
			ApplyMode:     n.mode,
			HealthTimeout: 20 * time.Second,
			TrialDuration: 5 * time.Second,
			Extra:         []string{"-v=2"},
		})); err != nil {
			t.Fatal(err)
		}
	}
	createConfigMap(t, c, "skew-a", withPods(replace, 43, nil))
	createConfigMap(t, c, "skew-dropin", withPods(dropin, 44, nil))
	capacity := func(t *testing.T, n *framework.Node, pods int64) {
		t.Helper()
		waitFor(t, 30*time.Second, "capacity pods", func() bool {
			node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			return err == nil && node.Status.Capacity.Pods().Value() == pods
		})
	}

	t.Run("configz has no kind; snapshot adds it", func(t *testing.T) {
		raw, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", replace.Name, "proxy", "configz").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(raw, []byte(`"kind"`)) {
			t.Errorf("kubelet %s configz has a kind; this test assumes it has none:\n%s", skewKubeletVersion, raw)
		}
		out := mustDKC(t, c, "", "snapshot", replace.Name).Stdout
		for _, want := range []string{`"kind": "KubeletConfiguration"`, `"apiVersion": "kubelet.config.k8s.io/v1beta1"`} {
			if !strings.Contains(out, want) {
				t.Errorf("snapshot of a %s kubelet lacks %q:\n%s", skewKubeletVersion, want, out)
			}
		}
	})

	t.Run("apply in replace mode", func(t *testing.T) {
		startUnassigned(t, c, replace.Name, time.Minute)
		pid := replace.KubeletPID()
		mustDKC(t, c, "", "assign", replace.Name, "--config", "skew-a")
		eventuallyStatus(t, c, replace.Name, time.Minute, Active("skew-a"), NoError())
		if replace.KubeletPID() == pid {
			t.Errorf("kubelet PID %d unchanged: not restarted", pid)
		}
		if got := configz(t, c, replace.Name)["maxPods"]; got != float64(43) {
			t.Errorf("configz maxPods %v, want 43", got)
		}
		capacity(t, replace, 43)
		eventuallyStatus(t, c, replace.Name, 30*time.Second, LKG("skew-a"))
		wantEvent(t, c, replace.Name, "Applied")
	})

	t.Run("config the kubelet refuses is rolled back", func(t *testing.T) {
		createConfigMap(t, c, "skew-bad", withPods(replace, 52, func(cfg map[string]any) {
			cfg["containerRuntimeEndpoint"] = "unix:///nonexistent.sock"
		}))
		startFrom(t, c, replace.Name, "skew-a", time.Minute)
		mustDKC(t, c, "", "assign", replace.Name, "--config", "skew-bad", "--allow-unsafe=redirect")
		st := eventuallyStatus(t, c, replace.Name, 90*time.Second, Assigned("skew-bad"), AnyError())
		if !strings.HasPrefix(st.Error, status.ValidateError+": ") {
			t.Errorf("status.error = %q, want prefix %q", st.Error, status.ValidateError+": ")
		}
		if !framework.IsConfigMap(st.Active, "skew-a") {
			t.Errorf("active %v, want skew-a", st.Active)
		}
		if got := configz(t, c, replace.Name)["maxPods"]; got != float64(43) {
			t.Errorf("configz maxPods %v after rollback, want 43", got)
		}
		waitReady(t, c, replace.Name)
		wantCondition(t, c, replace.Name, "False", "RolledBack")
	})

	t.Run("apply in drop-in mode", func(t *testing.T) {
		startUnassigned(t, c, dropin.Name, time.Minute)
		mustDKC(t, c, "", "assign", dropin.Name, "--config", "skew-dropin")
		eventuallyStatus(t, c, dropin.Name, time.Minute, Active("skew-dropin"), NoError())
		if got := configz(t, c, dropin.Name)["maxPods"]; got != float64(44) {
			t.Errorf("configz maxPods %v, want 44", got)
		}
		capacity(t, dropin, 44)
		onDisk, err := os.ReadFile(dropin.ConfigPath)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(onDisk, local[dropin.Name]) {
			t.Errorf("drop-in mode changed the kubelet's --config file:\n%s", onDisk)
		}
		entries, err := os.ReadDir(dropin.ConfigDir)
		if err != nil || len(entries) == 0 {
			t.Errorf("no drop-in in %s (%v)", dropin.ConfigDir, err)
		}
	})

	t.Run("reset restores the local config on both", func(t *testing.T) {
		startAssigned(t, c, replace.Name, "skew-a", time.Minute)
		startAssigned(t, c, dropin.Name, "skew-dropin", time.Minute)
		for _, n := range []*framework.Node{replace, dropin} {
			mustDKC(t, c, "", "reset", n.Name)
		}
		for _, n := range []*framework.Node{replace, dropin} {
			eventuallyStatus(t, c, n.Name, time.Minute, NoStatus())
			waitFor(t, 30*time.Second, "configz maxPods 110 on "+n.Name, func() bool { return configz(t, c, n.Name)["maxPods"] == float64(110) })
			onDisk, err := os.ReadFile(n.ConfigPath)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(onDisk, local[n.Name]) {
				t.Errorf("%s: kubelet config after reset differs from the original:\n%s", n.Name, onDisk)
			}
			wantCondition(t, c, n.Name, "True", "Reset")
		}
		if entries, _ := os.ReadDir(dropin.ConfigDir); len(entries) != 0 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("drop-ins left in %s after reset: %v", dropin.ConfigDir, names)
		}
	})
}
