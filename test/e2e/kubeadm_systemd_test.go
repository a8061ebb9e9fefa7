package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// TestKubeadmSystemdUnit installs the agent as deploy/systemd's unit, the
// way its header says, on a node that kubeadm joined under its own systemd:
// the binary in /usr/local/bin, the unit beside kubelet.service (enabled:
// multi-user.target and kubelet.service want it), NODE_NAME in
// /etc/default/kubectl-dkc-agent, and the kubelet's own credential with
// deploy/rbac-host.yaml. The agent applies an assigned config. Then the
// node's file is put back to kubeadm's while the node is down, and the node
// reboots: the agent's start-up writes the checkpointed config back before
// systemd starts the kubelet (Type=notify, Before=kubelet.service), so the
// kubelet's first start runs the assigned config.
func TestKubeadmSystemdUnit(t *testing.T) {
	c := framework.Setup(t, framework.Options{ControlPlaneOnly: true, Kubeadm: true})
	ctx := context.Background()
	root := filepath.Join("..", "..")
	n, err := c.StartKubeadmNode(ctx, "dkc-kubeadm-unit")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyManifest(ctx, filepath.Join(root, "deploy", "rbac-host.yaml"), false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(n.Path("/var/log/kubectl-dkc-agent.log")); err == nil {
				t.Logf("agent log:\n%s", framework.LastLines(string(b), 40))
			}
		}
	})
	local, err := os.ReadFile(n.Path("/var/lib/kubelet/config.yaml"))
	if err != nil {
		t.Fatal(err)
	}

	// What the unit's header says to do, as root on the node.
	unit, err := os.ReadFile(filepath.Join(root, "deploy", "systemd", "kubectl-dkc-agent.service"))
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(framework.AgentBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	for path, f := range map[string]struct {
		data []byte
		mode os.FileMode
	}{
		n.Path("/usr/local/bin/kubectl-dkc-agent"): {bin, 0o755},
		// A short trial, so that the config is last-known-good before
		// the reboot.
		n.Path("/etc/default/kubectl-dkc-agent"):              {[]byte("NODE_NAME=" + n.Name + "\nDKC_AGENT_ARGS=--trial-duration=5s\n"), 0o644},
		filepath.Join(n.UnitDir, "kubectl-dkc-agent.service"): {unit, 0o644},
		// The node runs no journald: the agent's log goes to a file.
		filepath.Join(n.UnitDir, "kubectl-dkc-agent.service.d", "60-dkc-e2e-log.conf"): {[]byte("[Service]\nStandardOutput=append:/var/log/kubectl-dkc-agent.log\nStandardError=inherit\n"), 0o644},
		// What `systemctl enable` makes of WantedBy=multi-user.target
		// kubelet.service; the manager's unit path is the test's
		// directory, where enable makes no links.
		filepath.Join(n.UnitDir, "kubelet.service.d", "50-wants-dkc-agent.conf"):   {[]byte("[Unit]\nWants=kubectl-dkc-agent.service\n"), 0o644},
		filepath.Join(n.UnitDir, "multi-user.target.d", "50-wants-dkc-agent.conf"): {[]byte("[Unit]\nWants=kubectl-dkc-agent.service\n"), 0o644},
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, f.data, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	// The unit has PrivateTmp=yes: systemd gives it a directory of its own
	// under /tmp, which on these nodes is the host's, and removes it when
	// the unit stops.
	before := agentPrivateTmps(t)
	for _, args := range [][]string{{"daemon-reload"}, {"start", "kubectl-dkc-agent.service"}} {
		if out, err := n.Systemd.Systemctl(args...); err != nil {
			t.Fatalf("systemctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	var firstBoot []string
	for _, dir := range agentPrivateTmps(t) {
		if !slices.Contains(before, dir) {
			firstBoot = append(firstBoot, dir)
		}
	}
	if len(firstBoot) == 0 {
		t.Fatalf("the running agent unit has no private /tmp directory (before it started: %q)", before)
	}

	createConfigMap(t, c, "unit-a", framework.ConfigWith(t, local, func(cfg map[string]any) { cfg["maxPods"] = 42 }))

	t.Run("the unit's agent applies an assigned config with the kubelet's credential", func(t *testing.T) {
		mustDKC(t, c, "", "assign", n.Name, "--config", "unit-a")
		eventuallyStatus(t, c, n.Name, time.Minute, Active("unit-a"), LKG("unit-a"), NoError())
		if got := configz(t, c, n.Name)["maxPods"]; got != float64(42) {
			t.Errorf("configz maxPods %v, want 42", got)
		}
	})

	t.Run("after a reboot the agent writes the checkpointed config before the kubelet starts", func(t *testing.T) {
		mustDKC(t, c, "", "assign", n.Name, "--config", "unit-a")
		eventuallyStatus(t, c, n.Name, time.Minute, Active("unit-a"), LKG("unit-a"), NoError())
		// While the node is down, its file goes back to kubeadm's bytes
		// (what a node image or a configuration tool might do at boot).
		onDisk, err := n.DiskPath("/var/lib/kubelet/config.yaml")
		if err != nil {
			t.Fatal(err)
		}
		// The node's logs are files on its /var/log, kept across the
		// reboot: what follows these offsets is the boot's.
		logs := map[string]int64{"/var/log/kubelet.log": 0, "/var/log/kubectl-dkc-agent.log": 0}
		for path := range logs {
			fi, err := os.Stat(n.Path(path))
			if err != nil {
				t.Fatal(err)
			}
			logs[path] = fi.Size()
		}
		sinceBoot := func(path string) string {
			t.Helper()
			b, err := os.ReadFile(n.Path(path))
			if err != nil {
				t.Fatal(err)
			}
			return string(b[logs[path]:])
		}
		began := time.Now()
		if err := n.Reboot(ctx, func() error { return os.WriteFile(onDisk, local, 0o644) }); err != nil {
			t.Fatal(err)
		}
		t.Logf("reboot to Ready: %s", time.Since(began).Round(time.Millisecond))
		// The node shut down as a machine does: its units stopped, and
		// systemd removed their private /tmp directories.
		for _, dir := range firstBoot {
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s, the agent unit's private /tmp before the reboot, is still there (stat: %v)", dir, err)
			}
		}
		show := func(unit, prop string) string {
			out, err := n.Systemd.Systemctl("show", "--property="+prop, "--value", unit)
			if err != nil {
				t.Fatal(err)
			}
			return strings.TrimSpace(out)
		}
		agentReady, _ := strconv.ParseInt(show("kubectl-dkc-agent.service", "ActiveEnterTimestampMonotonic"), 10, 64)
		kubeletStart, _ := strconv.ParseInt(show("kubelet.service", "ExecMainStartTimestampMonotonic"), 10, 64)
		if agentReady == 0 || kubeletStart == 0 || kubeletStart < agentReady {
			t.Errorf("the kubelet started at %d µs, the agent was ready at %d µs: want the kubelet after the agent", kubeletStart, agentReady)
		}
		if n := strings.Count(sinceBoot("/var/log/kubelet.log"), `"Started kubelet"`); n != 1 {
			t.Errorf("the kubelet started %d times since the boot, want once, on the assigned config", n)
		}
		if agent := sinceBoot("/var/log/kubectl-dkc-agent.log"); !strings.Contains(agent, "Restarted the kubelet on the checkpointed config") {
			t.Errorf("the agent's start-up did not write the checkpointed config; its log since the boot:\n%s", agent)
		}
		if got := configz(t, c, n.Name)["maxPods"]; got != float64(42) {
			t.Errorf("configz maxPods %v after the reboot, want 42", got)
		}
		eventuallyStatus(t, c, n.Name, time.Minute, Active("unit-a"), NoError())
	})
}

// agentPrivateTmps lists the private /tmp directories that systemd made on
// the host's /tmp for deploy/systemd's agent unit (PrivateTmp=yes).
func agentPrivateTmps(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob("/tmp/systemd-private-*-kubectl-dkc-agent.service-*")
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}
