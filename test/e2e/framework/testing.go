package framework

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
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
	return RequireBinaries(tb, dir, "components-v1.23", "kube-apiserver", "kubelet")
}

// PendingEnv names the file that says components are still being built:
// `make test` builds the older Kubernetes components (make target
// components-v1.34 and components-v1.23) in the background while the e2e
// tests run, creates this file before and removes it when that build ends,
// and writes the build's output to the same path plus ".log".
const PendingEnv = "DKC_COMPONENTS_PENDING"

// RequireBinaries returns dir once it holds every one of names, which make
// target builds. While a background build is pending (PendingEnv), it
// waits for it first, saying so every minute. A binary still missing then
// fails the test in CI and skips it elsewhere, naming the make target.
func RequireBinaries(tb testing.TB, dir, target string, names ...string) string {
	tb.Helper()
	missing := func() string {
		for _, name := range names {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				return filepath.Join(dir, name)
			}
		}
		return ""
	}
	if pending := os.Getenv(PendingEnv); pending != "" && missing() != "" {
		began := time.Now()
		said := began
		tb.Logf("waiting for make %s, building in the background (%s.log)", target, pending)
		_ = wait.PollUntilContextTimeout(context.Background(), 2*time.Second, time.Hour, true, func(context.Context) (bool, error) {
			if _, err := os.Stat(pending); err != nil || missing() == "" {
				return true, nil
			}
			if time.Since(said) >= time.Minute {
				said = time.Now()
				tb.Logf("still waiting for make %s after %s", target, time.Since(began).Round(time.Second))
			}
			return false, nil
		})
		tb.Logf("waited %s for make %s", time.Since(began).Round(time.Second), target)
		if m := missing(); m != "" {
			tb.Logf("the background build ended without %s; its log ends:\n%s", m, tail(pending+".log", 30))
		}
	}
	if m := missing(); m != "" {
		msg := "missing " + m + ": run `make " + target + "`"
		if InCI() {
			tb.Fatalf("CI=true: %s", msg)
		}
		tb.Skipf("skipping (set CI=true to make this a failure): %s", msg)
	}
	return dir
}

// ConfigWith returns the kubelet config local with edit applied (nil: as it
// is), as YAML: a payload that differs from local only where edit says.
func ConfigWith(tb testing.TB, local []byte, edit func(cfg map[string]any)) string {
	tb.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal(local, &cfg); err != nil {
		tb.Fatal(err)
	}
	if edit != nil {
		edit(cfg)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return string(out)
}

// MaxPods is an edit for ConfigWith that sets maxPods to n.
func MaxPods(n int) func(cfg map[string]any) {
	return func(cfg map[string]any) { cfg["maxPods"] = n }
}
