package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/kubectl-dkc/dkc/pkg/checkpoint"
	"github.com/kubectl-dkc/dkc/pkg/kubelet"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// Units of the isolated systemd. fake-kubelet stands in for kubelet.service
// and writes a PID file, so the test sees a restart happen (systemd turns
// "$$$$" into the shell's "$$"). broken-kubelet exits before it is ready, as a
// kubelet does with a config it rejects (the kubelet sends READY=1, so
// Type=notify). slow-kubelet never becomes ready within the restarter's
// timeout.
var systemdTestUnits = map[string]string{
	"fake-kubelet.service": `[Unit]
DefaultDependencies=no
[Service]
Type=exec
ExecStart=/bin/sh -c 'echo $$$$ > /run/fake-kubelet.pid; exec sleep infinity'
`,
	"broken-kubelet.service": `[Unit]
DefaultDependencies=no
[Service]
Type=notify
ExecStart=/bin/sh -c 'echo "invalid configuration" >&2; exit 1'
`,
	"slow-kubelet.service": `[Unit]
DefaultDependencies=no
[Service]
Type=notify
TimeoutStartSec=300
ExecStart=/bin/sleep 300
`,
}

// TestSystemdRestarter drives the agent's --restart=systemd restarter
// (kubelet.SystemdRestarter, go-systemd over the D-Bus system bus) against
// a real systemd 252, run as PID 1 of its own namespaces with a real
// dbus-daemon (framework.StartSystemd). It reaches the bus through
// DBUS_SYSTEM_BUS_ADDRESS, as the DaemonSet does with the host's socket.
func TestSystemdRestarter(t *testing.T) {
	if err := framework.PreflightSystemd(); err != nil {
		if framework.InCI() {
			t.Fatalf("CI=true: %v", err)
		}
		t.Skipf("skipping (set CI=true to make this a failure): %v", err)
	}
	sd, err := framework.StartSystemd(t.TempDir(), systemdTestUnits)
	if sd != nil {
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("systemd console:\n%s", sd.Console())
			}
			sd.Stop()
		})
	}
	if err != nil {
		t.Fatalf("start systemd: %v", err)
	}
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", sd.BusAddress())
	ctx := context.Background()

	mainPID := func(t *testing.T) string {
		t.Helper()
		b, err := os.ReadFile(sd.Path("/run/fake-kubelet.pid"))
		if err != nil {
			t.Fatalf("read the unit's PID file: %v", err)
		}
		return strings.TrimSpace(string(b))
	}
	state := func(t *testing.T, unit string) string {
		t.Helper()
		out, _ := sd.Systemctl("show", "--property=ActiveState", "--value", unit)
		return strings.TrimSpace(out)
	}

	t.Run("start, restart, stop", func(t *testing.T) {
		r := kubelet.NewSystemdRestarter("fake-kubelet.service", 30*time.Second)
		if err := r.Start(ctx); err != nil {
			t.Fatalf("Start: %v", err)
		}
		if got := state(t, "fake-kubelet.service"); got != "active" {
			t.Fatalf("after Start the unit is %q, want active", got)
		}
		before := mainPID(t)
		if err := r.Restart(ctx); err != nil {
			t.Fatalf("Restart: %v", err)
		}
		if got := state(t, "fake-kubelet.service"); got != "active" {
			t.Fatalf("after Restart the unit is %q, want active", got)
		}
		if after := mainPID(t); after == before {
			t.Fatalf("after Restart the unit's process is still %s: it was not restarted", before)
		}
		if err := r.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if got := state(t, "fake-kubelet.service"); got != "inactive" {
			t.Fatalf("after Stop the unit is %q, want inactive", got)
		}
	})

	t.Run("uid 0 without any capability restarts a unit, as the DaemonSet's agent does", func(t *testing.T) {
		// deploy/daemonset.yaml drops every capability: systemd lets the
		// bus peer restart units for being uid 0. setpriv empties every
		// capability set (and sets no_new_privs) before dbus-send asks for
		// the restart on the manager's system bus, in its mount namespace.
		if _, err := sd.Systemctl("start", "fake-kubelet.service"); err != nil {
			t.Fatal(err)
		}
		// The PID file of this start, not an earlier one's.
		running := func() string {
			b, _ := os.ReadFile(sd.Path("/run/fake-kubelet.pid"))
			out, _ := sd.Systemctl("show", "--property=MainPID", "--value", "fake-kubelet.service")
			if pid := strings.TrimSpace(string(b)); pid == strings.TrimSpace(out) {
				return pid
			}
			return ""
		}
		var before string
		waitFor(t, 30*time.Second, "fake-kubelet.service's PID file", func() bool {
			before = running()
			return before != ""
		})
		out, err := sd.Exec("setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
			"/bin/sh", "-c", `grep ^CapEff /proc/self/status && DBUS_SYSTEM_BUS_ADDRESS=unix:path=/run/dbus/system_bus_socket exec dbus-send --system --print-reply --dest=org.freedesktop.systemd1 `+
				`/org/freedesktop/systemd1 org.freedesktop.systemd1.Manager.RestartUnit string:fake-kubelet.service string:replace`)
		if err != nil {
			t.Fatalf("RestartUnit as uid 0 without capabilities: %v", err)
		}
		if !strings.Contains(out, "CapEff:\t0000000000000000") {
			t.Fatalf("the caller still had capabilities:\n%s", out)
		}
		waitFor(t, 30*time.Second, "a new main process of fake-kubelet.service", func() bool {
			pid := running()
			return pid != "" && pid != before
		})
		if _, err := sd.Systemctl("stop", "fake-kubelet.service"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a unit that fails to start is a failure", func(t *testing.T) {
		r := kubelet.NewSystemdRestarter("broken-kubelet.service", 30*time.Second)
		err := r.Restart(ctx)
		if want := "restart unit broken-kubelet.service: job failed"; err == nil || err.Error() != want {
			t.Fatalf("Restart: got error %v, want %q", err, want)
		}
	})

	t.Run("a unit slower than the timeout is a failure", func(t *testing.T) {
		r := kubelet.NewSystemdRestarter("slow-kubelet.service", 2*time.Second)
		began := time.Now()
		err := r.Restart(ctx)
		if want := "restart unit slow-kubelet.service: job did not finish within 2s"; err == nil || err.Error() != want {
			t.Fatalf("Restart: got error %v, want %q", err, want)
		}
		if took := time.Since(began); took > 10*time.Second {
			t.Fatalf("Restart returned after %s, want about the 2s timeout", took)
		}
		if got := state(t, "slow-kubelet.service"); got != "activating" {
			t.Errorf("the slow unit is %q, want activating: the timeout came from the restarter, not systemd", got)
		}
	})

	t.Run("a unit that does not exist is a failure", func(t *testing.T) {
		r := kubelet.NewSystemdRestarter("no-such-kubelet.service", 30*time.Second)
		err := r.Restart(ctx)
		if err == nil || !strings.Contains(err.Error(), "Unit no-such-kubelet.service not found") {
			t.Fatalf("Restart: got error %v, want systemd's \"Unit no-such-kubelet.service not found\"", err)
		}
	})
}

// TestSystemdUnit starts deploy/systemd/kubectl-dkc-agent.service, as
// shipped, in a real systemd 252 (framework.StartSystemd), on what a host
// gives it: the slim agent in /usr/local/bin, /etc/default/kubectl-dkc-agent,
// the kubelet's kubeconfig and config. /usr/local/bin, /etc and /var/lib are
// private tmpfs mounts of the manager's own mount namespace. The apiserver is unreachable there,
// as on a node that boots before its control plane: the agent's start-up
// needs none. It checks that the unit's variables reach the agent as the
// flags the docs say, that a settings file without NODE_NAME fails, and the
// start order: systemd starts kubelet.service (a stand-in that records the
// config it starts on) only after the agent's start-up wrote the config its
// store names, at boot and when the agent restarts beside a running kubelet.
func TestSystemdUnit(t *testing.T) {
	if err := framework.PreflightSystemd(); err != nil {
		if framework.InCI() {
			t.Fatalf("CI=true: %v", err)
		}
		t.Skipf("skipping (set CI=true to make this a failure): %v", err)
	}
	unit, err := os.ReadFile(filepath.Join("..", "..", "deploy", "systemd", "kubectl-dkc-agent.service"))
	if err != nil {
		t.Fatal(err)
	}
	agent := framework.AgentBinary(t)
	// A service with default dependencies needs these targets; this manager
	// boots no system, so they are empty.
	units := map[string]string{
		"kubectl-dkc-agent.service": string(unit),
		// The manager runs no journald: the agent's log goes to a file.
		"kubectl-dkc-agent.service.d/10-log.conf": "[Service]\nStandardOutput=append:/run/kubectl-dkc-agent.log\nStandardError=inherit\n",
		// Wants= is what `systemctl enable` makes of the agent's
		// WantedBy=kubelet.service.
		"kubelet.service": `[Unit]
Wants=kubectl-dkc-agent.service
[Service]
Type=exec
ExecStart=/usr/local/bin/fake-kubelet
`,
	}
	for _, target := range []string{"sysinit.target", "basic.target", "shutdown.target"} {
		units[target] = "[Unit]\nDefaultDependencies=no\n"
	}
	sd, err := framework.StartSystemd(t.TempDir(), units)
	if sd != nil {
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("systemd console:\n%s", sd.Console())
				if b, err := os.ReadFile(sd.Path("/run/kubectl-dkc-agent.log")); err == nil {
					t.Logf("agent log:\n%s", b)
				}
			}
			sd.Stop()
		})
	}
	if err != nil {
		t.Fatalf("start systemd: %v", err)
	}
	// /etc and /var/lib as a whole: their subdirectories must not be made
	// on the host's disk, which the manager's namespace shares. /tmp and
	// /var/tmp for the unit's PrivateTmp=, whose directories systemd makes
	// there; the test's own directory under /tmp (the units, the console)
	// is bound back to its place on the new /tmp.
	keep := "/run/dkc-e2e-dir"
	for _, argv := range [][]string{
		{"mount", "-n", "-t", "tmpfs", "tmpfs", "/usr/local/bin"},
		{"mount", "-n", "-t", "tmpfs", "tmpfs", "/etc"},
		{"mount", "-n", "-t", "tmpfs", "tmpfs", "/var/lib"},
		{"mount", "-n", "-t", "tmpfs", "tmpfs", "/var/tmp"},
		{"mkdir", keep},
		{"mount", "-n", "--bind", sd.Dir, keep},
		{"mount", "-n", "-t", "tmpfs", "tmpfs", "/tmp"},
		{"mkdir", "-p", sd.Dir},
		{"mount", "-n", "--bind", keep, sd.Dir},
	} {
		if _, err := sd.Exec(argv...); err != nil {
			t.Fatal(err)
		}
	}
	bin, err := os.ReadFile(agent)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Fatal(err)
	}
	files := []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{"/usr/local/bin/kubectl-dkc-agent", bin, 0o755},
		// The stand-in kubelet: one line per start, the config it read.
		{"/usr/local/bin/fake-kubelet", []byte(`#!/bin/sh
{ printf 'start:'; tr '\n' ' ' < /var/lib/kubelet/config.yaml; echo; } >> /run/fake-kubelet.starts
exec sleep infinity
`), 0o755},
		{"/etc/kubernetes/kubelet.conf", []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: none}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600},
		{"/var/lib/kubelet/config.yaml", []byte(maxPodsConfig(110)), 0o644},
		{"/var/lib/kubelet/pki/kubelet.crt", ca, 0o644},
		{"/etc/default/kubectl-dkc-agent", []byte("NODE_NAME=\nDKC_AGENT_ARGS=\n"), 0o644},
	}
	for _, f := range files {
		path := sd.Path(f.path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, f.data, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	showUnit := func(t *testing.T, unit, prop string) string {
		t.Helper()
		out, _ := sd.Systemctl("show", "--property="+prop, "--value", unit)
		return strings.TrimSpace(out)
	}
	show := func(t *testing.T, prop string) string {
		t.Helper()
		return showUnit(t, "kubectl-dkc-agent.service", prop)
	}

	t.Run("without NODE_NAME the agent does not run", func(t *testing.T) {
		// Type=notify: the start job fails, as the agent exits before
		// READY=1.
		if out, err := sd.Systemctl("start", "kubectl-dkc-agent.service"); err == nil {
			t.Fatalf("systemctl start succeeded, want the agent's failure: %s", out)
		}
		if got := show(t, "ExecMainStatus"); got != "1" {
			t.Errorf("the agent's exit status is %q, want 1", got)
		}
		if _, err := sd.Systemctl("stop", "kubectl-dkc-agent.service"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("with NODE_NAME the agent runs the unit's flags", func(t *testing.T) {
		env := "NODE_NAME=node-a\nDKC_AGENT_ARGS=--apply-mode dropin --kubelet-config-dir /etc/kubernetes/kubelet.conf.d\n"
		if err := os.WriteFile(sd.Path("/etc/default/kubectl-dkc-agent"), []byte(env), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(sd.Path("/etc/kubernetes/kubelet.conf.d"), 0o755); err != nil {
			t.Fatal(err)
		}
		_, _ = sd.Systemctl("reset-failed", "kubectl-dkc-agent.service")
		if _, err := sd.Systemctl("start", "kubectl-dkc-agent.service"); err != nil {
			t.Fatal(err)
		}
		// Type=notify: the start job is done once start-up is, which
		// records the node's local config in the store.
		if _, err := os.Stat(sd.Path("/var/lib/kubectl-dkc/store/meta/state")); err != nil {
			t.Fatalf("the agent's start job is done, but its store has no record: %v", err)
		}
		consistently(t, 2*time.Second, "active", func() bool { return show(t, "ActiveState") == "active" })
		if got := show(t, "ActiveState"); got != "active" {
			t.Fatalf("unit is %s, want active", got)
		}
		pid := show(t, "MainPID")
		raw, err := sd.Exec("cat", "/proc/"+pid+"/cmdline")
		if err != nil {
			t.Fatal(err)
		}
		args := strings.Split(strings.TrimRight(raw, "\x00"), "\x00")
		want := []string{"/usr/local/bin/kubectl-dkc-agent",
			"--dynamic-config-dir", "/var/lib/kubectl-dkc",
			"--kubelet-config", "/var/lib/kubelet/config.yaml",
			"--kubelet-root-dir", "/var/lib/kubelet",
			"--restart", "systemd", "--systemd-unit", "kubelet.service",
			"--kubelet-certificate-authority", "/var/lib/kubelet/pki/kubelet.crt",
			"--kubelet-tls-server-name", "node-a",
			"--apply-mode", "dropin", "--kubelet-config-dir", "/etc/kubernetes/kubelet.conf.d"}
		if diff := cmp.Diff(want, args); diff != "" {
			t.Errorf("agent command line (-want +got):\n%s", diff)
		}
		environ, err := sd.Exec("cat", "/proc/"+pid+"/environ")
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range []string{"NODE_NAME=node-a", "KUBECONFIG=/etc/kubernetes/kubelet.conf"} {
			if !strings.Contains("\x00"+environ, "\x00"+kv+"\x00") {
				t.Errorf("agent environment lacks %s", kv)
			}
		}
		// The sandbox, seen from the agent's own mount namespace: it
		// writes only its store, the kubelet's root dir and the drop-in
		// dir; home directories are hidden; no new privileges.
		inAgent := func(script string) error {
			_, err := sd.Exec("nsenter", "-t", pid, "-m", "--", "/bin/sh", "-c", script)
			return err
		}
		for _, dir := range []string{"/var/lib/kubectl-dkc", "/var/lib/kubelet", "/etc/kubernetes/kubelet.conf.d", "/tmp"} {
			if err := inAgent("touch " + dir + "/.dkc-e2e && rm " + dir + "/.dkc-e2e"); err != nil {
				t.Errorf("the agent cannot write %s: %v", dir, err)
			}
		}
		for _, dir := range []string{"/etc", "/etc/kubernetes", "/usr/local/bin", "/var/lib", "/run"} {
			if err := inAgent("touch " + dir + "/.dkc-e2e"); err == nil || !strings.Contains(err.Error(), "Read-only file system") {
				t.Errorf("the agent writing %s: %v, want Read-only file system", dir, err)
			}
		}
		if host, err := sd.Exec("ls", "-A", "/root"); err != nil || host == "" {
			t.Logf("/root outside the unit: %q (%v)", host, err)
		} else if got, err := sd.Exec("nsenter", "-t", pid, "-m", "--", "ls", "-A", "/root"); err != nil || got != "" {
			t.Errorf("the agent sees /root as %q (%v), want it empty (ProtectHome); outside the unit it holds %q", got, err, host)
		}
		status, err := sd.Exec("cat", "/proc/"+pid+"/status")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(status, "NoNewPrivs:\t1") {
			t.Errorf("the agent runs without no_new_privs:\n%s", status)
		}
		if _, err := sd.Systemctl("stop", "kubectl-dkc-agent.service"); err != nil {
			t.Fatal(err)
		}
	})

	// starts is the config the stand-in kubelet read at each of its starts.
	starts := func(t *testing.T) []string {
		t.Helper()
		b, err := os.ReadFile(sd.Path("/run/fake-kubelet.starts"))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if len(b) == 0 {
			return nil
		}
		return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	}
	started := func(cfg string) string { return "start:" + strings.ReplaceAll(cfg, "\n", " ") }
	// checkStarts waits for len(want) starts of the kubelet (Type=exec:
	// its job is done at exec, before the script records the config), and
	// a second more for any extra one, then compares them with want.
	checkStarts := func(t *testing.T, want ...string) {
		t.Helper()
		_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return len(starts(t)) >= len(want), nil
		})
		consistently(t, time.Second, "no more kubelet starts", func() bool { return len(starts(t)) <= len(want) })
		if diff := cmp.Diff(want, starts(t)); diff != "" {
			t.Errorf("configs the kubelet started on (-want +got):\n%s", diff)
		}
	}
	// timed runs systemctl args and says how long its job took.
	timed := func(t *testing.T, args ...string) time.Duration {
		t.Helper()
		began := time.Now()
		if _, err := sd.Systemctl(args...); err != nil {
			t.Fatalf("after %s: %v", time.Since(began).Round(time.Millisecond), err)
		}
		return time.Since(began)
	}
	cfgA, cfgB := maxPodsConfig(42), maxPodsConfig(43)
	// nodeA is the agent's environment file of the subtests below.
	nodeA := func(t *testing.T) {
		t.Helper()
		env := "NODE_NAME=node-a\nDKC_AGENT_ARGS=\n"
		if err := os.WriteFile(sd.Path("/etc/default/kubectl-dkc-agent"), []byte(env), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// boot starts kubelet.service, as a boot does, on a fresh store whose
	// record names ConfigMap a (cfgA), in replace mode, with the kubelet's
	// config still the local one: a node that went down after the agent
	// recorded an assignment and before it wrote it. It returns how long
	// the start took, once the kubelet started on cfgA.
	boot := func(t *testing.T) time.Duration {
		t.Helper()
		nodeA(t)
		if err := os.RemoveAll(sd.Path("/var/lib/kubectl-dkc")); err != nil {
			t.Fatal(err)
		}
		recordAssignment(t, sd.Path("/var/lib/kubectl-dkc"), "a", cfgA, nil)
		before := starts(t)
		// kubelet.service wants the agent.
		took := timed(t, "start", "kubelet.service")
		checkStarts(t, append(before, started(cfgA))...)
		return took
	}

	t.Run("at boot the kubelet starts once, on the config the agent's start-up wrote", func(t *testing.T) {
		took := boot(t)
		if got := show(t, "ActiveState") + " " + show(t, "NRestarts"); got != "active 0" {
			t.Errorf("agent unit: ActiveState NRestarts = %q, want \"active 0\"", got)
		}
		// A restart job of the kubelet queued while the agent's unit is
		// still starting waits for that start: a deadlock that would end
		// only with the agent's TimeoutStartSec (30s).
		if took > 10*time.Second {
			t.Errorf("starting kubelet.service took %s, want a few seconds", took.Round(time.Millisecond))
		}
		t.Logf("systemctl start kubelet.service took %s", took.Round(time.Millisecond))
	})

	t.Run("a restarted agent puts its config in place and restarts the running kubelet", func(t *testing.T) {
		// The starting state: booted, as the subtest above leaves it.
		if showUnit(t, "kubelet.service", "ActiveState") != "active" {
			boot(t)
		}
		if _, err := sd.Systemctl("stop", "kubectl-dkc-agent.service"); err != nil {
			t.Fatal(err)
		}
		if got := showUnit(t, "kubelet.service", "ActiveState"); got != "active" {
			t.Fatalf("kubelet.service is %q without the agent, want active: it only wants the agent", got)
		}
		a := unitTestSource("a")
		recordAssignment(t, sd.Path("/var/lib/kubectl-dkc"), "b", cfgB, a)

		before := starts(t)
		took := timed(t, "start", "kubectl-dkc-agent.service")
		checkStarts(t, append(before, started(cfgB))...)
		for _, u := range []string{"kubectl-dkc-agent.service", "kubelet.service"} {
			if got := showUnit(t, u, "ActiveState"); got != "active" {
				t.Errorf("%s is %q, want active", u, got)
			}
		}
		if took > 10*time.Second {
			t.Errorf("starting the agent took %s, want a few seconds", took.Round(time.Millisecond))
		}
		t.Logf("systemctl start kubectl-dkc-agent.service took %s", took.Round(time.Millisecond))
		if _, err := sd.Systemctl("stop", "kubelet.service", "kubectl-dkc-agent.service"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a start-up that hangs holds the kubelet only until TimeoutStartSec", func(t *testing.T) {
		// The starting state: both units stopped, and a store with a
		// record, whose kubelet config file the kubelet then starts on.
		nodeA(t)
		if _, err := sd.Systemctl("stop", "kubelet.service", "kubectl-dkc-agent.service"); err != nil {
			t.Fatal(err)
		}
		state := sd.Path("/var/lib/kubectl-dkc/store/meta/state")
		if _, err := os.Stat(state); os.IsNotExist(err) {
			recordAssignment(t, sd.Path("/var/lib/kubectl-dkc"), "b", cfgB, unitTestSource("a"))
		}
		current, err := os.ReadFile(sd.Path("/var/lib/kubelet/config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if got := show(t, "TimeoutStartUSec") + " " + show(t, "TimeoutStartFailureMode"); got != "30s kill" {
			t.Errorf("the unit's TimeoutStartSec and TimeoutStartFailureMode are %q, want the documented \"30s kill\"", got)
		}
		// The same with 3s, for a short test.
		dropIn := filepath.Join(sd.Dir, "units", "kubectl-dkc-agent.service.d", "20-timeout.conf")
		if err := os.WriteFile(dropIn, []byte("[Service]\nTimeoutStartSec=3s\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := sd.Systemctl("daemon-reload"); err != nil {
			t.Fatal(err)
		}
		// The record is a FIFO: the agent's start-up blocks reading it, as
		// on a hung disk, before READY=1.
		if err := os.Remove(state); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(state, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			// Unblock the agent: a writer that closes gives its read EOF.
			if f, err := os.OpenFile(state, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
		})

		before := starts(t)
		took := timed(t, "start", "kubelet.service")
		checkStarts(t, append(before, started(string(current)))...)
		if got := show(t, "Result"); got != "timeout" {
			t.Errorf("the agent unit's Result is %q, want timeout", got)
		}
		if took < 3*time.Second || took > 10*time.Second {
			t.Errorf("starting kubelet.service took %s, want about the 3s TimeoutStartSec", took.Round(time.Millisecond))
		}
		t.Logf("systemctl start kubelet.service took %s with a hung agent", took.Round(time.Millisecond))
	})
}

// maxPodsConfig is a kubelet config with maxPods n.
func maxPodsConfig(n int) string {
	return fmt.Sprintf("kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: %d\n", n)
}

// unitTestSource names ConfigMap kube-system/NAME as recordAssignment stores it.
func unitTestSource(name string) *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: "kube-system", Name: name, KubeletConfigKey: "kubelet", UID: types.UID("uid-" + name), ResourceVersion: "1",
	}}
}

// recordAssignment checkpoints ConfigMap NAME with payload in the store
// under dir and records it as assigned, with active the config the agent
// last wrote: what the agent's sync leaves just before it writes the
// kubelet's config.
func recordAssignment(t *testing.T, dir, name, payload string, active *corev1.NodeConfigSource) {
	t.Helper()
	store, err := checkpoint.Open(dir, clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	src := unitTestSource(name)
	if err := store.Save(src.ConfigMap.UID, src.ConfigMap.ResourceVersion, map[string][]byte{"kubelet": []byte(payload)}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := store.SetState(checkpoint.State{Assigned: src, AssignedAt: &now, Active: active}); err != nil {
		t.Fatal(err)
	}
}
