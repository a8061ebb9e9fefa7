package framework

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// InCI reports whether the run is CI's (CI=true), where a component that
// cannot start fails the run instead of skipping.
func InCI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v == "true" || v == "1"
}

// Setup starts a cluster for t and stops it when t and its subtests end,
// even when one of them panics. When the machine lacks a prerequisite, the
// test fails in CI and is skipped elsewhere, naming exactly what is missing.
// When t fails, the tail of every component log is written to t's log.
func Setup(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if err := Preflight(opts); err != nil {
		if InCI() {
			t.Fatalf("CI=true: %v", err)
		}
		t.Skipf("skipping e2e (set CI=true to make this a failure): %v", err)
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	c, err := Start(context.Background(), opts)
	if c != nil {
		t.Cleanup(func() {
			if t.Failed() {
				for _, path := range c.Logs() {
					t.Logf("---- tail of %s\n%s", path, tail(path, 25))
				}
			}
			c.Stop()
			if !t.Failed() {
				_ = os.RemoveAll(c.Dir)
			} else {
				t.Logf("cluster state kept in %s", c.Dir)
			}
		})
	}
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	return c
}

func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return LastLines(string(b), lines)
}

// LastLines is the last n lines of s.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// deployPath is deploy/name as the tests see it: go test runs a package's
// tests in the package's directory, and the packages that use these helpers
// are test/e2e and test/bench, two levels below the repository's root.
func deployPath(name string) string { return filepath.Join("..", "..", "deploy", name) }

// InstallCRDs installs deploy/crds.yaml in c (c.InstallCRDs), and fails tb
// if it cannot.
func InstallCRDs(tb testing.TB, c *Cluster) {
	tb.Helper()
	if err := c.InstallCRDs(context.Background(), deployPath("crds.yaml")); err != nil {
		tb.Fatal(err)
	}
}

// AgentKubeconfig applies deploy/rbac.yaml to c and returns a kubeconfig of
// the agent's identity (AgentIdentity), bound by it.
func AgentKubeconfig(tb testing.TB, c *Cluster) string {
	tb.Helper()
	if err := c.ApplyManifest(context.Background(), deployPath("rbac.yaml"), false); err != nil {
		tb.Fatal(err)
	}
	kubeconfig, err := c.UserKubeconfig(AgentIdentity)
	if err != nil {
		tb.Fatal(err)
	}
	return kubeconfig
}

// LegacyBinDir is the directory that holds kube-apiserver and kubelet
// LegacyVersion: $DKC_LEGACY_BIN_DIR, else where
// hack/build-components-v1.23.sh puts them. When either is missing, tb
// fails in CI and is skipped elsewhere.
func LegacyBinDir(tb testing.TB) string {
	tb.Helper()
	dir := os.Getenv("DKC_LEGACY_BIN_DIR")
	if dir == "" {
		dir = filepath.Join(CacheBinDir(), LegacyVersion)
	}
	for _, name := range []string{"kube-apiserver", "kubelet"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			msg := "missing " + filepath.Join(dir, name) + ": run `make components-v1.23` (hack/build-components-v1.23.sh)"
			if InCI() {
				tb.Fatalf("CI=true: %s", msg)
			}
			tb.Skipf("skipping (set CI=true to make this a failure): %s", msg)
		}
	}
	return dir
}
