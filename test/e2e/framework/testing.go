package framework

import (
	"context"
	"os"
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
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
