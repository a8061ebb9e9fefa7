// Command dkc-cluster runs the e2e harness's cluster for people: etcd, a
// kube-apiserver and real kubelets in their own network namespaces, kept up
// until it receives SIGTERM or SIGINT. hack/local-cluster.sh drives it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	dir := flag.String("dir", "/tmp/kubectl-dkc-cluster", "state directory; the kubeconfig is DIR/kubeconfig")
	nodes := flag.Int("nodes", 2, "number of kubelets")
	agentBinary := flag.String("agent-binary", "", "kubectl-dkc to run as the dkc agent on every node (none when empty)")
	rbac := flag.String("agent-rbac", "deploy/rbac.yaml", "the agent's RBAC manifest, applied before the agents start")
	trial := flag.Duration("agent-trial-duration", time.Minute, "the agents' --trial-duration")
	applyMode := flag.String("agent-apply-mode", "replace", "the agents' --apply-mode: replace, or dropin (one partial config then fits every node, as a rollout over all nodes needs)")
	images := flag.String("agent-images", "_output/image", "with --node-kind=kubeadm: where make image wrote the agent, controller and pause archives")
	root := flag.String("root", ".", "with --node-kind=kubeadm: the repository, whose deploy/ is applied and whose hack/image pushes the images to the cluster's registry")
	crds := flag.String("crds", "deploy/crds.yaml", "dkc's CustomResourceDefinitions, installed first")
	controllerManifest := flag.String("controller-manifest", "deploy/controller.yaml", "with --agent-binary: the controller's RBAC, applied before the controller process starts")
	agentArgs := flag.String("agent-args", "", "with --node-kind=kubeadm: flags added to the DaemonSet's agent args, space-separated, as an operator's kustomization would add them (the last of a repeated flag wins)")
	nodeKind := flag.String("node-kind", "process", "process: kubelets as processes of this program, each with an agent process (--agent-binary); kubeadm: nodes that kubeadm joins, each under its own systemd, with the agent and the controller as deploy/'s DaemonSet and Deployment")
	flag.Parse()
	kubeadm := *nodeKind == "kubeadm"
	if *nodeKind != "process" && !kubeadm {
		return fmt.Errorf("--node-kind must be process or kubeadm, got %q", *nodeKind)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	state := filepath.Join(*dir, "state")
	if err := os.RemoveAll(state); err != nil {
		return err
	}
	logf := func(format string, args ...any) {
		fmt.Printf("%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
	c, err := framework.Start(ctx, framework.Options{Nodes: *nodes, Dir: state, Logf: logf, Pods: kubeadm, Kubeadm: kubeadm, ControlPlaneOnly: kubeadm})
	if err != nil {
		return err
	}
	defer func() {
		logf("stopping")
		c.Stop()
		_ = os.Remove(filepath.Join(*dir, "ready"))
		logf("stopped")
	}()
	if kubeadm {
		for i := 1; i <= *nodes; i++ {
			n, err := c.StartKubeadmNode(ctx, fmt.Sprintf("dkc-node-%d", i))
			if err != nil {
				return err
			}
			logf("node %s: ip %s, kubeadm node under systemd (PID %d on the host); its logs: %s", n.Name, n.IP, n.Systemd.PID, strings.Join(n.Logs(), ", "))
		}
	}
	kubeconfig := filepath.Join(*dir, "kubeconfig")
	b, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		return err
	}
	if err := os.WriteFile(kubeconfig, b, 0o600); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		logf("node %s: ip %s, kubelet log %s, config %s", n.Name, n.IP, n.LogPath, n.ConfigPath)
	}
	if err := c.InstallCRDs(ctx, *crds); err != nil {
		return err
	}
	if kubeadm {
		if err := deployDaemonSet(ctx, c, *root, *images, strings.Fields(*agentArgs), logf); err != nil {
			return err
		}
	} else if *agentBinary != "" {
		if err := startAgents(ctx, c, *agentBinary, *rbac, *trial, *applyMode, logf); err != nil {
			return err
		}
		if err := startController(ctx, c, *agentBinary, *controllerManifest, logf); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(*dir, "ready"), []byte(kubeconfig+"\n"), 0o644); err != nil {
		return err
	}
	logf("ready: export KUBECONFIG=%s", kubeconfig)
	<-ctx.Done()
	return nil
}

// startController runs `kubectl-dkc controller` on the host as the
// identity of the controller's manifest, whose RBAC it applies first (its
// Deployment gets no pods: on process nodes no controller manager runs).
func startController(ctx context.Context, c *framework.Cluster, binary, manifest string, logf func(string, ...any)) error {
	if err := c.ApplyManifest(ctx, manifest, false); err != nil {
		return err
	}
	kubeconfig, err := c.UserKubeconfig(framework.ControllerIdentity)
	if err != nil {
		return err
	}
	ctl, err := c.StartController(binary, kubeconfig, "local-controller")
	if err != nil {
		return err
	}
	logf("dkc controller pid %d, log %s", ctl.PID(), ctl.LogPath)
	return nil
}

// startAgents runs one dkc agent per node, as the identity of the agent's
// RBAC manifest, in exec mode with the harness's restart command.
func startAgents(ctx context.Context, c *framework.Cluster, binary, rbac string, trial time.Duration, applyMode string, logf func(string, ...any)) error {
	if err := c.ApplyManifest(ctx, rbac, false); err != nil {
		return err
	}
	kubeconfig, err := c.UserKubeconfig(framework.AgentIdentity)
	if err != nil {
		return err
	}
	for _, n := range c.Nodes {
		a, err := n.StartAgent(binary, n.AgentArgs(framework.AgentOptions{Kubeconfig: kubeconfig, TrialDuration: trial, ApplyMode: applyMode}))
		if err != nil {
			return err
		}
		logf("node %s: dkc agent pid %d, log %s", n.Name, a.PID(), a.LogPath)
	}
	return nil
}
