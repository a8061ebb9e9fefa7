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
	lc := upLocalCluster(t, nil)
	run, kubeconfig := lc.run, lc.kubeconfig
	if n := strings.Count(lc.up, "dkc agent pid"); n != 2 {
		t.Errorf("up started %d agents, want 2:\n%s", n, lc.up)
	}
	nodes := run(lc.kubectl, "--kubeconfig", kubeconfig, "get", "nodes", "--no-headers")
	if strings.Count(nodes, " Ready ") != 2 {
		t.Errorf("kubectl get nodes: want 2 Ready nodes:\n%s", nodes)
	}
	for _, node := range []string{"dkc-node-1", "dkc-node-2"} {
		raw := run(lc.kubectl, "--kubeconfig", kubeconfig, "get", "--raw", "/api/v1/nodes/"+node+"/proxy/configz")
		if !strings.Contains(raw, `"kubeletconfig"`) {
			t.Errorf("configz of %s: %s", node, raw)
		}
	}
	if again := run(lc.script, "up"); !strings.Contains(again, "already running") {
		t.Errorf("a second up should say the cluster is already running:\n%s", again)
	}
	lc.down(t)
	if out := run(lc.script, "down"); !strings.Contains(out, "no cluster running") {
		t.Errorf("a second down: %s", out)
	}
}

// TestLocalClusterKubeadm runs `make cluster-up NODE_KIND=kubeadm`'s
// script: one node that kubeadm joined under its own systemd, running the
// agent and the controller from deploy/ as pods.
func TestLocalClusterKubeadm(t *testing.T) {
	lc := upLocalCluster(t, []string{"NODE_KIND=kubeadm"}, "1")
	for _, want := range []string{"kubeadm node dkc-node-1 Ready", "node dkc-node-1: dkc-agent pod", "dkc-controller pod"} {
		if !strings.Contains(lc.up, want) {
			t.Errorf("up did not say %q:\n%s", want, lc.up)
		}
	}
	nodes := lc.run(lc.kubectl, "--kubeconfig", lc.kubeconfig, "get", "nodes", "--no-headers")
	if strings.Count(nodes, " Ready ") != 1 {
		t.Errorf("kubectl get nodes: want 1 Ready node:\n%s", nodes)
	}
	// The agent runs as deploy/'s DaemonSet, which restarts the kubelet
	// through systemd.
	args := lc.run(lc.kubectl, "--kubeconfig", lc.kubeconfig, "-n", "kube-system", "get", "daemonset", "dkc-agent", "-o", "jsonpath={.spec.template.spec.containers[0].args}")
	if !strings.Contains(args, "--restart=systemd") {
		t.Errorf("the agent's args are %s, want deploy/'s --restart=systemd", args)
	}
	lc.down(t)
}

// localCluster is a cluster that hack/local-cluster.sh brought up.
type localCluster struct {
	script, dir, kubeconfig, kubectl string
	// up is what `up` printed.
	up  string
	run func(name string, args ...string) string
}

// upLocalCluster runs `hack/local-cluster.sh up ARGS...` with env added to
// the environment, in a directory of the test's, and brings the cluster
// down at the end of the test, whatever happened.
func upLocalCluster(t *testing.T, env []string, args ...string) *localCluster {
	t.Helper()
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
	lc := &localCluster{dir: t.TempDir(), kubectl: kubectl, script: filepath.Join("..", "..", "hack", "local-cluster.sh")}
	env = append(append(os.Environ(), "DKC_CLUSTER_DIR="+lc.dir), env...)
	lc.run = func(name string, args ...string) string {
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
		cmd := exec.Command(lc.script, "down")
		cmd.Env = env
		_ = cmd.Run()
	})
	lc.up = lc.run(lc.script, append([]string{"up"}, args...)...)
	lc.kubeconfig = filepath.Join(lc.dir, "kubeconfig")
	if !strings.Contains(lc.up, "export KUBECONFIG="+lc.kubeconfig) {
		t.Fatalf("up did not print the export line:\n%s", lc.up)
	}
	return lc
}

// down brings the cluster down and checks that no process of it is left.
func (lc *localCluster) down(t *testing.T) {
	t.Helper()
	lc.run(lc.script, "down")
	for _, p := range framework.LeftoverProcesses() {
		if strings.Contains(p, lc.dir) || strings.Contains(p, "dkc-cluster") {
			t.Errorf("left behind after down: %s", p)
		}
	}
}
