package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// TestPluginDiscovery runs the binary the way users do: as a plugin that the
// real kubectl finds on PATH under the name kubectl-dkc.
func TestPluginDiscovery(t *testing.T) {
	kubectl, err := framework.Kubectl()
	if err != nil {
		if framework.InCI() {
			t.Fatalf("kubectl is not on PATH: %v", err)
		}
		t.Skipf("kubectl is not on PATH (%v): install kubectl to test plugin discovery", err)
	}
	// kubectl finds plugins by file name: the directory must hold a
	// kubectl-dkc, which the harness's build is, and DKC_BINARY may not be.
	dkc := framework.DKCBinary()
	pluginDir := filepath.Dir(dkc)
	if filepath.Base(dkc) != "kubectl-dkc" {
		pluginDir = t.TempDir()
		if err := os.Symlink(dkc, filepath.Join(pluginDir, "kubectl-dkc")); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "PATH="+pluginDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	run := func(t *testing.T, args ...string) (string, string) {
		t.Helper()
		cmd := exec.Command(kubectl, args...)
		cmd.Env = env
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		t.Logf("$ kubectl %s\n%s%s", strings.Join(args, " "), out.String(), errOut.String())
		if err != nil {
			t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
		}
		return out.String(), errOut.String()
	}

	t.Run("plugin list", func(t *testing.T) {
		out, _ := run(t, "plugin", "list")
		if want := filepath.Join(pluginDir, "kubectl-dkc"); !strings.Contains(out, want) {
			t.Errorf("kubectl plugin list does not show %s", want)
		}
	})

	t.Run("version", func(t *testing.T) {
		out, _ := run(t, "dkc", "version")
		if !strings.HasPrefix(out, "kubectl dkc ") {
			t.Errorf("kubectl dkc version printed %q, want it to start with %q", out, "kubectl dkc ")
		}
	})

	t.Run("status", func(t *testing.T) {
		c := framework.Setup(t, framework.Options{Nodes: 1})
		// kubectl hands every argument after the plugin name to the plugin,
		// global flags included.
		out, _ := run(t, "dkc", "status", "--kubeconfig", c.Kubeconfig)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			t.Fatalf("kubectl dkc status printed %d lines, want a header and one row", len(lines))
		}
		if got, want := strings.Fields(lines[0]), "NODE CARRIER ASSIGNED ACTIVE LAST-KNOWN-GOOD AGENT ERROR"; strings.Join(got, " ") != want {
			t.Errorf("header %q, want %q", got, want)
		}
		if got, want := strings.Fields(lines[1]), c.Nodes[0].Name+" <none> <none> <none> <none> none <none>"; strings.Join(got, " ") != want {
			t.Errorf("row %q, want %q", got, want)
		}
	})
}
