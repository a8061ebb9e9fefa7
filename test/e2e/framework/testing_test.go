package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that records what RequireBinaries says, so that
// its failing and skipping can be tested: Fatalf and Skipf return.
type recorder struct {
	testing.TB
	logs, fatal, skip []string
}

func (r *recorder) Helper() {}
func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = append(r.fatal, fmt.Sprintf(format, args...))
}
func (r *recorder) Skipf(format string, args ...any) {
	r.skip = append(r.skip, fmt.Sprintf(format, args...))
}

// pendingBuild makes the file make test keeps while it builds in the
// background, with the build's log beside it, and returns its path.
func pendingBuild(t *testing.T, log string) string {
	t.Helper()
	pending := filepath.Join(t.TempDir(), "components-pending")
	if err := os.WriteFile(pending, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pending+".log", []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(PendingEnv, pending)
	return pending
}

// A test that needs an older kubelet while make test still builds it waits
// for the build, and goes on with the binary it made.
func TestRequireBinariesWaitsForThePendingBuild(t *testing.T) {
	dir := t.TempDir()
	pending := pendingBuild(t, "")
	done := make(chan error, 1)
	time.AfterFunc(2*time.Second, func() {
		err := os.WriteFile(filepath.Join(dir, "kubelet"), []byte("#!/bin/sh\n"), 0o755)
		if err == nil {
			err = os.Remove(pending)
		}
		done <- err
	})
	r := &recorder{TB: t}
	began := time.Now()
	if got := RequireBinaries(r, dir, "components-v1.34", "kubelet"); got != dir {
		t.Errorf("RequireBinaries = %s, want %s", got, dir)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(began); waited < 2*time.Second {
		t.Errorf("returned after %s, before the build made the kubelet", waited)
	}
	if len(r.fatal)+len(r.skip) > 0 {
		t.Errorf("failed %q, skipped %q; want neither", r.fatal, r.skip)
	}
	if len(r.logs) == 0 || !strings.Contains(r.logs[0], "waiting for make components-v1.34") {
		t.Errorf("logs %q, want the wait said", r.logs)
	}
}

// A build that ends without the binary fails the test in CI, naming the
// make target, and shows the end of the build's log.
func TestRequireBinariesFailsWhenTheBuildEndsWithoutThem(t *testing.T) {
	t.Setenv("CI", "true")
	dir := t.TempDir()
	pending := pendingBuild(t, "go: k8s.io/kubernetes@v1.34.12: no space left on device\n")
	time.AfterFunc(time.Second, func() { _ = os.Remove(pending) })
	r := &recorder{TB: t}
	RequireBinaries(r, dir, "components-v1.34", "kubelet")
	if len(r.fatal) != 1 || !strings.Contains(r.fatal[0], "missing "+filepath.Join(dir, "kubelet")+": run `make components-v1.34`") {
		t.Errorf("fatal %q, want the missing kubelet and the make target", r.fatal)
	}
	if !strings.Contains(strings.Join(r.logs, "\n"), "no space left on device") {
		t.Errorf("logs %q, want the end of the build's log", r.logs)
	}
}

// With no build pending and the binaries in place, nothing waits.
func TestRequireBinariesPresent(t *testing.T) {
	t.Setenv(PendingEnv, "")
	dir := t.TempDir()
	for _, name := range []string{"kube-apiserver", "kubelet"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := &recorder{TB: t}
	if got := RequireBinaries(r, dir, "components-v1.23", "kube-apiserver", "kubelet"); got != dir || len(r.fatal)+len(r.skip)+len(r.logs) > 0 {
		t.Errorf("RequireBinaries = %s, fatal %q, skip %q, logs %q; want %s and nothing said", got, r.fatal, r.skip, r.logs, dir)
	}
}
