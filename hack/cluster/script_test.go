package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// fakeCluster stands in for dkc-cluster: it writes $dir/ready (unless
// FAKE_FAIL is set, when it exits 1 at once) and stays up until SIGTERM.
const fakeCluster = `#!/usr/bin/env bash
dir=
while (($#)); do [[ $1 == --dir ]] && dir=$2; shift; done
echo "fake dkc-cluster $$ started"
[[ -n ${FAKE_FAIL:-} ]] && { echo "fake dkc-cluster: failing"; exit 1; }
trap 'echo stopping; rm -f "$dir/ready"; echo stopped; exit 0' TERM
[[ -n ${FAKE_NEVER_READY:-} ]] || echo ready >"$dir/ready"
while :; do sleep 0.05; done
`

// slowNohup is a nohup whose process takes a while before it execs the
// command: the window between the fork and the exec of dkc-cluster, which a
// loaded machine opens. Its command line does not name the command (the
// command's arguments travel in the environment), as the forked shell's
// does not.
const slowNohup = `#!/usr/bin/env bash
export SLOW_NOHUP_ARGS=$(printf '%q ' "$@")
exec bash -c 'sleep 1; eval exec "$SLOW_NOHUP_ARGS"'
`

// fakeGo "builds" dkc-cluster: `go build -o BIN ./hack/cluster` copies the
// fake to BIN.
const fakeGo = `#!/usr/bin/env bash
while (($#)); do [[ $1 == -o ]] && { cp "$FAKE_CLUSTER" "$2"; chmod +x "$2"; }; shift; done
`

// scriptEnv is a copy of hack/local-cluster.sh in a root of its own, whose
// builds are stubs and whose dkc-cluster is fakeCluster.
type scriptEnv struct {
	root, dir string
	env       []string
}

func newScriptEnv(t *testing.T) *scriptEnv {
	t.Helper()
	tmp := t.TempDir()
	s := &scriptEnv{root: filepath.Join(tmp, "root"), dir: filepath.Join(tmp, "cluster")}
	script, err := os.ReadFile("../local-cluster.sh")
	if err != nil {
		t.Fatal(err)
	}
	fakes := filepath.Join(tmp, "fakes")
	files := map[string]string{
		filepath.Join(s.root, "hack", "local-cluster.sh"):      string(script),
		filepath.Join(s.root, "hack", "build-components.sh"):   "#!/bin/sh\n",
		filepath.Join(s.root, "_output", "bin", "kubectl-dkc"): "#!/bin/sh\n",
		filepath.Join(fakes, "go"):                             fakeGo,
		filepath.Join(fakes, "nohup"):                          slowNohup,
		filepath.Join(tmp, "fake-cluster"):                     fakeCluster,
		filepath.Join(tmp, "components", "placeholder"):        "",
	}
	for path, content := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s.env = append(os.Environ(),
		"PATH="+fakes+":"+os.Getenv("PATH"),
		"DKC_CLUSTER_DIR="+s.dir,
		"DKC_BIN_DIR="+filepath.Join(tmp, "components"),
		"FAKE_CLUSTER="+filepath.Join(tmp, "fake-cluster"),
		"NODE_KIND=", "AGENT=",
	)
	t.Cleanup(func() {
		// Whatever the script left: end every process this test started,
		// exec'd or not (they carry its FAKE_CLUSTER in their environment).
		for _, pid := range s.startedPIDs(t) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return s
}

// run runs the script with args and extra environment; it returns the
// combined output and whether the script exited 0.
func (s *scriptEnv) run(t *testing.T, env []string, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command(filepath.Join(s.root, "hack", "local-cluster.sh"), args...)
	cmd.Env = append(append([]string(nil), s.env...), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err == nil
}

// startedPIDs lists the processes with this environment's FAKE_CLUSTER.
func (s *scriptEnv) startedPIDs(t *testing.T) []int {
	t.Helper()
	var mark string
	for _, e := range s.env {
		if strings.HasPrefix(e, "FAKE_CLUSTER=") {
			mark = e
		}
	}
	return s.procs(t, func(_, environ string) bool {
		return strings.Contains(environ, "\x00"+mark+"\x00")
	})
}

// clusterPIDs lists the processes running this environment's dkc-cluster.
func (s *scriptEnv) clusterPIDs(t *testing.T) []int {
	t.Helper()
	bin := filepath.Join(s.root, "_output", "bin", "dkc-cluster")
	return s.procs(t, func(cmdline, _ string) bool {
		return strings.Contains(cmdline, bin+"\x00") && strings.Contains(cmdline, "\x00"+s.dir+"\x00")
	})
}

// procs lists the live processes whose command line and environment match.
func (s *scriptEnv) procs(t *testing.T, match func(cmdline, environ string) bool) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		environ, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if match(string(cmdline), "\x00"+string(environ)) {
			if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && strings.Contains(string(stat), ") Z ") {
				continue
			}
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitNoCluster waits until no dkc-cluster of this environment runs.
func (s *scriptEnv) waitNoCluster(t *testing.T, why string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return len(s.clusterPIDs(t)) == 0, nil
	})
	if err != nil {
		t.Errorf("%s: dkc-cluster still runs (pids %v)", why, s.clusterPIDs(t))
	}
}

// TestLocalClusterScriptExecWindow: up waits for the process it started,
// not for its command line, which names dkc-cluster only once the forked
// shell has exec'd it.
func TestLocalClusterScriptExecWindow(t *testing.T) {
	s := newScriptEnv(t)
	out, ok := s.run(t, nil, "up")
	if !ok || !strings.Contains(out, "export KUBECONFIG="+s.dir+"/kubeconfig") {
		t.Errorf("up failed on a cluster that became ready:\n%s", out)
	}
	if pids := s.clusterPIDs(t); len(pids) != 1 {
		t.Fatalf("after up, dkc-cluster pids %v, want one", pids)
	}
	if out, ok := s.run(t, nil, "up"); !ok || !strings.Contains(out, "already running") {
		t.Errorf("a second up should say the cluster is already running:\n%s", out)
	}
	if out, ok := s.run(t, nil, "down"); !ok || !strings.Contains(out, "stopped") {
		t.Errorf("down:\n%s", out)
	}
	s.waitNoCluster(t, "after down")
	if out, _ := s.run(t, nil, "down"); !strings.Contains(out, "no cluster running") {
		t.Errorf("a second down: %s", out)
	}
}

// TestLocalClusterScriptFailures: whatever way up fails, it stops what it
// started and shows the log.
func TestLocalClusterScriptFailures(t *testing.T) {
	tests := map[string]struct {
		env  []string
		want string
	}{
		"the cluster exits": {
			env:  []string{"FAKE_FAIL=1"},
			want: "fake dkc-cluster: failing",
		},
		"the cluster is not ready in time": {
			env:  []string{"FAKE_NEVER_READY=1", "DKC_CLUSTER_READY_TIMEOUT=3"},
			want: "not ready within 3s",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := newScriptEnv(t)
			out, ok := s.run(t, tc.env, "up")
			if ok {
				t.Errorf("up succeeded:\n%s", out)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("up said:\n%s\nwant it to say %q", out, tc.want)
			}
			s.waitNoCluster(t, "after a failed up")
			if out, _ := s.run(t, nil, "down"); !strings.Contains(out, "no cluster running") {
				t.Errorf("down after a failed up: %s", out)
			}
		})
	}
}

// TestLocalClusterScriptDownWithoutPidfile: down finds and stops a cluster
// of its directory whose pid file is gone (and only that one); up refuses
// to start a second one beside it.
func TestLocalClusterScriptDownWithoutPidfile(t *testing.T) {
	s := newScriptEnv(t)
	// Started as up starts it, but its pid file was lost.
	bin := filepath.Join(s.root, "_output", "bin", "dkc-cluster")
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fake, err := os.ReadFile(filepath.Join(filepath.Dir(s.root), "fake-cluster"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, fake, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--dir", s.dir, "--nodes", "2")
	cmd.Env = s.env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// A process of another cluster directory is not this cluster's.
	other := exec.Command(bin, "--dir", s.dir+"-other", "--nodes", "2")
	other.Env = s.env
	if err := os.MkdirAll(s.dir+"-other", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		_, err := os.Stat(filepath.Join(s.dir, "ready"))
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the fake cluster did not become ready: %v", err)
	}
	if out, ok := s.run(t, nil, "up"); ok || !strings.Contains(out, "runs without its pid file") {
		t.Errorf("up beside a cluster of its directory without a pid file: exit 0 %v:\n%s", ok, out)
	}
	out, ok := s.run(t, nil, "down")
	if !ok || strings.Contains(out, "no cluster running") {
		t.Errorf("down did not find the cluster:\n%s", out)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Errorf("the cluster still runs after down:\n%s", out)
		_ = cmd.Process.Kill()
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("down stopped another directory's cluster: %v", err)
	}
}
