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
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	state := filepath.Join(*dir, "state")
	if err := os.RemoveAll(state); err != nil {
		return err
	}
	logf := func(format string, args ...any) {
		fmt.Printf("%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
	c, err := framework.Start(ctx, framework.Options{Nodes: *nodes, Dir: state, Logf: logf})
	if err != nil {
		return err
	}
	defer func() {
		logf("stopping")
		c.Stop()
		_ = os.Remove(filepath.Join(*dir, "ready"))
		logf("stopped")
	}()
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
	if err := os.WriteFile(filepath.Join(*dir, "ready"), []byte(kubeconfig+"\n"), 0o644); err != nil {
		return err
	}
	logf("ready: export KUBECONFIG=%s", kubeconfig)
	<-ctx.Done()
	return nil
}
