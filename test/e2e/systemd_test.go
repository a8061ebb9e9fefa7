package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
// flags the docs say, and that a settings file without NODE_NAME fails.
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
	agent := agentBinary(t)
	// A service with default dependencies needs these targets; this manager
	// boots no system, so they are empty.
	units := map[string]string{"kubectl-dkc-agent.service": string(unit)}
	for _, target := range []string{"sysinit.target", "basic.target", "shutdown.target"} {
		units[target] = "[Unit]\nDefaultDependencies=no\n"
	}
	sd, err := framework.StartSystemd(t.TempDir(), units)
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
	// /etc and /var/lib as a whole: their subdirectories must not be made
	// on the host's disk, which the manager's namespace shares.
	for _, dir := range []string{"/usr/local/bin", "/etc", "/var/lib"} {
		if _, err := sd.Exec("mount", "-t", "tmpfs", "tmpfs", dir); err != nil {
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
		{"/etc/kubernetes/kubelet.conf", []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: none}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600},
		{"/var/lib/kubelet/config.yaml", []byte("kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 110\n"), 0o644},
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
	show := func(t *testing.T, prop string) string {
		t.Helper()
		out, _ := sd.Systemctl("show", "--property="+prop, "--value", "kubectl-dkc-agent.service")
		return strings.TrimSpace(out)
	}

	t.Run("without NODE_NAME the agent does not run", func(t *testing.T) {
		if _, err := sd.Systemctl("start", "kubectl-dkc-agent.service"); err != nil {
			t.Fatal(err) // Type=simple: the start job succeeds once the process runs
		}
		waitFor(t, 15*time.Second, "the agent to exit", func() bool {
			return show(t, "ExecMainStatus") == "1"
		})
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
		// Start-up is done when the store records the node's local config.
		waitFor(t, 20*time.Second, "the agent's checkpoint store", func() bool {
			_, err := os.Stat(sd.Path("/var/lib/kubectl-dkc/store"))
			return err == nil
		})
		time.Sleep(2 * time.Second)
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
		if _, err := sd.Systemctl("stop", "kubectl-dkc-agent.service"); err != nil {
			t.Fatal(err)
		}
	})
}

// agentBinary is the slim kubectl-dkc-agent: $DKC_AGENT_BINARY (make e2e
// builds it), else built here.
func agentBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("DKC_AGENT_BINARY"); p != "" {
		return p
	}
	p := filepath.Join(t.TempDir(), "kubectl-dkc-agent")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", p, "github.com/kubectl-dkc/dkc/cmd/kubectl-dkc-agent")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build kubectl-dkc-agent: %v\n%s", err, out)
	}
	return p
}
