package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Faults the e2e tests inject into real components: an apiserver that goes
// away and comes back, an agent whose files sit on a small tmpfs or a
// read-only mount that only its own mount namespace sees, and a kubelet
// restart that pauses, so that a test can act in the middle of an apply.

// StopAPIServer stops kube-apiserver, by its PID, and keeps it stopped; etcd,
// the kubelets and the agents keep running. It sends SIGTERM and, as the
// apiserver may wait for its clients' watches, SIGKILL after 5s.
func (c *Cluster) StopAPIServer() error { return c.apiserver.stop(5 * time.Second) }

// StartAPIServer starts kube-apiserver again with the flags, port and
// certificates it had, and waits until /readyz says ok.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	if err := c.apiserver.start(); err != nil {
		return err
	}
	return c.waitAPIServerReady(ctx)
}

// StartAgentInMountNS starts the agent as StartAgent does, after running the
// shell commands setup inside the agent's private mount namespace, such as
// TmpfsMount or ReadOnlyMount. Their mounts exist only there: the host and
// the kubelet never see them, and they go away with the agent.
func (n *Node) StartAgentInMountNS(binary string, args []string, setup ...string) (*Agent, error) {
	script := "set -e\n" + strings.Join(setup, "\n") + "\nexec \"$@\"\n"
	return n.StartAgent("/bin/sh", append([]string{"-c", script, "dkc-agent-setup", binary}, args...))
}

// TmpfsMount is a setup command that mounts a tmpfs of size (such as "64k")
// over dir.
func TmpfsMount(dir, size string) string {
	return "mount -n -t tmpfs -o size=" + shellQuote(size) + ",mode=0700 dkc-faults " + shellQuote(dir)
}

// ReadOnlyMount is a setup command, or a script for Agent.InMountNS, that
// makes dir read-only, except for the subdirectories writable, which stay
// writable.
func ReadOnlyMount(dir string, writable ...string) string {
	cmds := []string{
		"mount -n --bind " + shellQuote(dir) + " " + shellQuote(dir),
		"mount -n -o remount,bind,ro " + shellQuote(dir),
	}
	for _, w := range writable {
		// A bind of a path under a read-only mount is read-only too, until
		// remounted.
		cmds = append(cmds, "mount -n --bind "+shellQuote(w)+" "+shellQuote(w),
			"mount -n -o remount,bind,rw "+shellQuote(w))
	}
	return strings.Join(cmds, "\n")
}

// InMountNS runs the shell command script inside the running agent's mount
// namespace, for example to grow its tmpfs or make a directory read-only.
// Every agent the harness starts has a private mount namespace of its own
// (see wrapArgv), so its mounts never reach the host or the kubelet.
func (a *Agent) InMountNS(script string) error {
	pid := a.PID()
	if pid == 0 {
		return errors.New("agent is not running")
	}
	out, err := exec.Command("nsenter", "--mount=/proc/"+strconv.Itoa(pid)+"/ns/mnt", "--", "/bin/sh", "-c", script).CombinedOutput()
	if err != nil {
		return fmt.Errorf("in the mount namespace of agent %d: %s: %w: %s", pid, script, err, out)
	}
	return nil
}

// Path is path as the running agent sees it, through its mount namespace.
func (a *Agent) Path(path string) (string, error) {
	pid := a.PID()
	if pid == 0 {
		return "", errors.New("agent is not running")
	}
	return filepath.Join("/proc", strconv.Itoa(pid), "root", path), nil
}

// RestartGate wraps a node's RestartCommand so that, while held, each
// kubelet restart pauses after the new kubelet started and before the
// command returns: the agent then waits between its restart and its health
// gate until the test releases it.
type RestartGate struct {
	// Command is the wrapping restart command, for the agent's
	// --restart-command.
	Command string
	dir     string
}

// NewRestartGate writes the node's gated restart command. It starts
// released.
func (n *Node) NewRestartGate() (*RestartGate, error) {
	g := &RestartGate{dir: filepath.Join(n.Dir, "restart-gate"), Command: filepath.Join(n.Dir, "restart-kubelet-gated")}
	if err := os.MkdirAll(g.dir, 0o755); err != nil {
		return nil, err
	}
	script := fmt.Sprintf(`#!/bin/sh
# %[1]s, paused while %[2]s/hold exists: it touches %[2]s/paused and waits.
set -u
%[1]s || exit $?
if [ -e %[2]s/hold ]; then
  touch %[2]s/paused
  while [ -e %[2]s/hold ]; do sleep 0.05; done
  rm -f %[2]s/paused
fi
exit 0
`, shellQuote(n.RestartCommand), shellQuote(g.dir))
	return g, os.WriteFile(g.Command, []byte(script), 0o755)
}

// Hold makes the next restarts pause.
func (g *RestartGate) Hold() error {
	return os.WriteFile(filepath.Join(g.dir, "hold"), nil, 0o644)
}

// WaitPaused waits until a restart paused: the new kubelet runs, and the
// agent waits for the restart command.
func (g *RestartGate) WaitPaused(ctx context.Context, timeout time.Duration) error {
	return poll(ctx, timeout, func() (bool, error) {
		_, err := os.Stat(filepath.Join(g.dir, "paused"))
		return err == nil, nil
	})
}

// Release lets a paused restart return and the next ones run through.
func (g *RestartGate) Release() error {
	err := os.Remove(filepath.Join(g.dir, "hold"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
