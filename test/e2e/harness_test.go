package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// TestHarness proves the foundation every other e2e test stands on: real
// kubelets that register Ready, the apiserver's node proxy reaching each of
// them, and a restart on an edited config that shows in configz and in the
// Node's capacity.
func TestHarness(t *testing.T) {
	c := framework.Setup(t, framework.Options{Nodes: 2})
	ctx := context.Background()

	t.Run("two kubelets Ready", func(t *testing.T) {
		nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes.Items) != 2 {
			t.Fatalf("want 2 nodes, got %d", len(nodes.Items))
		}
		for _, n := range nodes.Items {
			if !framework.IsReady(&n) {
				t.Errorf("node %s is not Ready", n.Name)
			}
			if v := n.Status.NodeInfo.KubeletVersion; v != "v1.37.2" {
				t.Errorf("node %s: kubelet version %q, want v1.37.2", n.Name, v)
			}
		}
	})

	t.Run("configz through the apiserver proxy", func(t *testing.T) {
		for _, n := range c.Nodes {
			cfg := configz(t, c, n.Name)
			if got := cfg["address"]; got != n.IP {
				t.Errorf("node %s: configz address %v, want %s", n.Name, got, n.IP)
			}
			if got := cfg["maxPods"]; got != float64(110) {
				t.Errorf("node %s: configz maxPods %v, want 110", n.Name, got)
			}
		}
	})

	t.Run("restart with edited maxPods", func(t *testing.T) {
		n := c.Nodes[0]
		var cfg map[string]any
		if err := yaml.Unmarshal(n.DefaultKubeletConfig(), &cfg); err != nil {
			t.Fatal(err)
		}
		cfg["maxPods"] = 42
		edited, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		if err := n.RestartKubeletWithConfig(edited); err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, "capacity pods=42 on "+n.Name, func() bool {
			node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			return err == nil && node.Status.Capacity.Pods().Value() == 42
		})
		t.Logf("restart to new capacity: %s", time.Since(began).Round(time.Millisecond))
		if got := configz(t, c, n.Name)["maxPods"]; got != float64(42) {
			t.Errorf("configz maxPods %v, want 42", got)
		}
		// The other node is untouched.
		if got := configz(t, c, c.Nodes[1].Name)["maxPods"]; got != float64(110) {
			t.Errorf("node %s: configz maxPods %v, want 110", c.Nodes[1].Name, got)
		}
	})
}

func TestDeployManifests(t *testing.T) {
	c := framework.Setup(t, framework.Options{Nodes: 1})
	// Every manifest under deploy/ is accepted by a real 1.37 apiserver:
	// schema, defaulting and admission, without storing anything.
	manifests, err := filepath.Glob(filepath.Join("..", "..", "deploy", "*.yaml"))
	if err != nil || len(manifests) < 2 {
		t.Fatalf("deploy manifests: %v %v", manifests, err)
	}
	for _, path := range manifests {
		if filepath.Base(path) == "kustomization.yaml" {
			continue // not an object; TestKubeadmDaemonSet applies it with kubectl apply -k
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			if err := c.ApplyManifest(context.Background(), path, true); err != nil {
				t.Fatal(err)
			}
		})
	}
	// And a broken one is not: the check can fail.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x, namespace: kube-system}\nspec: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyManifest(context.Background(), bad, true); err == nil || !strings.Contains(err.Error(), "selector") {
		t.Errorf("a DaemonSet without selector and template: got %v, want an error about spec.selector", err)
	}
}

func configz(t *testing.T, c *framework.Cluster, node string) map[string]any {
	t.Helper()
	var raw []byte
	var err error
	waitFor(t, 30*time.Second, "configz of "+node, func() bool {
		raw, err = c.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "configz").DoRaw(context.Background())
		return err == nil
	})
	var out struct {
		KubeletConfig map[string]any `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("configz of %s: %v: %s", node, err, strings.TrimSpace(string(raw)))
	}
	return out.KubeletConfig
}
