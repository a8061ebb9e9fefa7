package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// quickstartPath is the page TestQuickstart runs.
var quickstartPath = filepath.Join("..", "..", "docs", "quickstart.md")

// TestQuickstart runs every sh block of docs/quickstart.md as written, in
// order, in one bash with -euo pipefail, as an operator would paste them:
// kubectl and kubectl-dkc on PATH (kubectl finds the plugin), KUBECONFIG
// the cluster admin's, IMAGE_REPO the test registry holding the images
// tagged with the binary's version. The cluster is kubeadm nodes with no
// dkc on them, as someone else's cluster would be. Then nothing of dkc may
// remain.
func TestQuickstart(t *testing.T) {
	blocks, err := shellBlocks(quickstartPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) < 5 {
		t.Fatalf("%s has %d sh blocks; the test no longer finds them", quickstartPath, len(blocks))
	}

	c, _ := kubeadmPodsCluster(t)
	ctx := context.Background()
	for _, name := range []string{"dkc-quick-1", "dkc-quick-2"} {
		began := time.Now()
		n, err := c.StartKubeadmNodeWith(ctx, name, framework.KubeadmNodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("kubeadm node %s joined and Ready in %s", n.Name, time.Since(began).Round(time.Millisecond))
	}

	bin := t.TempDir()
	kubectl, err := framework.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"kubectl": kubectl, "kubectl-dkc": framework.DKCBinary()} {
		abs, err := filepath.Abs(target)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}

	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	for _, b := range blocks {
		fmt.Fprintf(&script, "echo '### %s:%d'\n%s\n", quickstartPath, b.line, b.text)
	}
	cmd := exec.Command("bash", "-c", script.String())
	cmd.Dir = t.TempDir()
	cmd.Env = []string{
		"PATH=" + bin + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + t.TempDir(),
		"KUBECONFIG=" + c.Kubeconfig,
		"IMAGE_REPO=" + c.Registry,
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	began := time.Now()
	err = cmd.Run()
	t.Logf("the quickstart's %d blocks ran in %s:\n%s", len(blocks), time.Since(began).Round(time.Second), out.String())
	if err != nil {
		logPods(t, c, "app.kubernetes.io/part-of=kubectl-dkc")
		t.Fatalf("the quickstart failed (the last ### line above names its block): %v", err)
	}
	if left := dkcLeft(t, c); len(left) > 0 {
		t.Errorf("what remains of dkc after the quickstart:\n%s", strings.Join(left, "\n"))
	}
}

// shellBlock is a fenced sh block of a doc and the line of its fence.
type shellBlock struct {
	line int
	text string
}

// shellBlocks returns the ```sh blocks of the Markdown file path.
func shellBlocks(path string) ([]shellBlock, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var (
		out []shellBlock
		cur *shellBlock
	)
	for i, l := range strings.Split(string(b), "\n") {
		switch {
		case cur == nil && strings.TrimSpace(l) == "```sh":
			cur = &shellBlock{line: i + 1}
		case cur != nil && strings.TrimSpace(l) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += l + "\n"
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s: the sh block of line %d has no end", path, cur.line)
	}
	return out, nil
}
