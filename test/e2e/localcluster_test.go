package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// TestLocalCluster runs `make cluster-up`'s script as a person would, uses
// the kubeconfig it prints with the real kubectl, and checks that
// `cluster-down` leaves no process of the cluster behind. (TestMain checks
// namespaces, links, mounts and the firewall for the whole run.)
func TestLocalCluster(t *testing.T) {
	if err := framework.Preflight(framework.Options{}); err != nil {
		if framework.InCI() {
			t.Fatalf("CI=true: %v", err)
		}
		t.Skipf("skipping e2e (set CI=true to make this a failure): %v", err)
	}
	kubectl, err := framework.Kubectl()
	if err != nil {
		if framework.InCI() {
			t.Fatal("CI=true: kubectl is not on PATH")
		}
		t.Skip("kubectl is not on PATH")
	}
	dir := t.TempDir()
	script := filepath.Join("..", "..", "hack", "local-cluster.sh")
	env := append(os.Environ(), "DKC_CLUSTER_DIR="+dir)
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	t.Cleanup(func() {
		// Even when an assertion failed: nothing may stay up.
		cmd := exec.Command(script, "down")
		cmd.Env = env
		_ = cmd.Run()
	})

	up := run(script, "up")
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if !strings.Contains(up, "export KUBECONFIG="+kubeconfig) {
		t.Fatalf("up did not print the export line:\n%s", up)
	}
	if n := strings.Count(up, "dkc agent pid"); n != 2 {
		t.Errorf("up started %d agents, want 2:\n%s", n, up)
	}
	nodes := run(kubectl, "--kubeconfig", kubeconfig, "get", "nodes", "--no-headers")
	if strings.Count(nodes, " Ready ") != 2 {
		t.Errorf("kubectl get nodes: want 2 Ready nodes:\n%s", nodes)
	}
	for _, node := range []string{"dkc-node-1", "dkc-node-2"} {
		raw := run(kubectl, "--kubeconfig", kubeconfig, "get", "--raw", "/api/v1/nodes/"+node+"/proxy/configz")
		if !strings.Contains(raw, `"kubeletconfig"`) {
			t.Errorf("configz of %s: %s", node, raw)
		}
	}
	if again := run(script, "up"); !strings.Contains(again, "already running") {
		t.Errorf("a second up should say the cluster is already running:\n%s", again)
	}

	run(script, "down")
	for _, p := range framework.LeftoverProcesses() {
		if strings.Contains(p, dir) || strings.Contains(p, "dkc-cluster") {
			t.Errorf("left behind after down: %s", p)
		}
	}
	if out := run(script, "down"); !strings.Contains(out, "no cluster running") {
		t.Errorf("a second down: %s", out)
	}
}
