package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMain runs the test binary as a child of TestChildren when
// PROBE_TEST_CHILD says so (its -child flag is not the test binary's).
func TestMain(m *testing.M) {
	switch os.Getenv("PROBE_TEST_CHILD") {
	case "1":
		runChild(os.Stdin, os.Stdout)
		os.Exit(0)
	case "crash": // as a Go runtime that could not make a thread
		os.Exit(2)
	}
	os.Exit(m.Run())
}

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(newHandler())
	defer srv.Close()
	do := func(method, path string) string {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.Status + " " + strings.TrimSpace(string(b))
	}
	for _, step := range []struct{ method, path, want string }{
		{"GET", "/readyz", "200 OK ok"},
		{"GET", "/healthz", "200 OK ok"},
		{"POST", "/fail", "200 OK failing"},
		{"GET", "/readyz", "503 Service Unavailable not ready"},
		{"GET", "/healthz", "200 OK ok"},
		{"POST", "/ok", "200 OK ok"},
		{"GET", "/readyz", "200 OK ok"},
		{"GET", "/fail", "405 Method Not Allowed Method Not Allowed"},
		{"GET", "/nothing", "404 Not Found 404 page not found"},
	} {
		if got := do(step.method, step.path); got != step.want {
			t.Errorf("%s %s: got %q, want %q", step.method, step.path, got, step.want)
		}
	}
}

// TestServeStops: serve answers on its address and returns nil once its
// context ends, as on SIGTERM.
func TestServeStops(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, addr) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /readyz: %s", resp.Status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not answer on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve returned %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after its context ended")
	}
}

// TestChildren: the probe starts its processes, each of which says it
// runs, and they end when it stops them; a program that cannot run is an
// error that names which process failed.
func TestChildren(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PROBE_TEST_CHILD", "1")
	children, err := startChildren(self, 3)
	if err != nil {
		t.Fatalf("startChildren: %v", err)
	}
	if len(children) != 3 {
		t.Fatalf("%d children, want 3", len(children))
	}
	for _, c := range children {
		if c.cmd.Process == nil || c.cmd.ProcessState != nil {
			t.Errorf("child %v does not run", c.cmd.Process)
		}
	}
	stopChildren(children)
	for _, c := range children {
		if c.cmd.ProcessState == nil || !c.cmd.ProcessState.Success() {
			t.Errorf("child %v: %v, want it ended with 0", c.cmd.Process, c.cmd.ProcessState)
		}
	}

	t.Setenv("PROBE_TEST_CHILD", "crash")
	_, err = startChildren(self, 2)
	if want := "start process 1 of 2: it did not say it runs (exit status 2)"; err == nil || err.Error() != want {
		t.Errorf("startChildren of children that crash: %v, want %q", err, want)
	}

	_, err = startChildren(filepath.Join(t.TempDir(), "nothing"), 2)
	if err == nil || !strings.Contains(err.Error(), "start process 1 of 2") {
		t.Errorf("startChildren of a missing program: %v, want an error naming process 1 of 2", err)
	}
}
