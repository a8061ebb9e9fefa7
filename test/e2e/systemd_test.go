package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

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
