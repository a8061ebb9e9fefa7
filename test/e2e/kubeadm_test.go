package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/pkg/kubelet"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// TestKubeadmNode boots a node as operators run one (framework.
// StartKubeadmNode): systemd 252 as PID 1 of the node's own namespaces,
// containerd.service, and a kubelet.service that `kubeadm join` set up
// against the harness's control plane. It checks kubeadm's layout on the
// node, that the kubelet is a child of the node's systemd, and that a
// restart over the node's D-Bus, as the agent's --restart=systemd does it,
// starts a new kubelet that comes back Ready.
func TestKubeadmNode(t *testing.T) {
	c := framework.Setup(t, framework.Options{ControlPlaneOnly: true, Kubeadm: true})
	ctx := context.Background()
	const name = "dkc-kubeadm-1"
	began := time.Now()
	n, err := c.StartKubeadmNode(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubeadm node %s joined and Ready in %s", name, time.Since(began).Round(time.Millisecond))
	if b, err := os.ReadFile(n.JoinLog); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "WARNING") || strings.Contains(line, "ERROR") {
				t.Logf("kubeadm join: %s", line)
			}
		}
	}

	readFile := func(t *testing.T, path string) string {
		t.Helper()
		b, err := os.ReadFile(n.Path(path))
		if err != nil {
			t.Fatalf("on the node: %v", err)
		}
		return string(b)
	}
	// hostPID waits for the kubelet whose PID in the node's namespace
	// (NSpid's last field) is want, a child of the node's systemd, and
	// returns its PID seen from the host. A process that systemd just
	// forked is named "(kubelet)" until it has exec'd the kubelet.
	hostPID := func(t *testing.T, want int) int {
		t.Helper()
		var pid int
		waitFor(t, 30*time.Second, fmt.Sprintf("a kubelet whose PID in the node is %d, a child of the node's systemd (host PID %d)", want, n.Systemd.PID), func() bool {
			matches, _ := filepath.Glob("/proc/[0-9]*/status")
			for _, m := range matches {
				b, err := os.ReadFile(m)
				if err != nil {
					continue
				}
				fields := statusFields(string(b))
				ns := strings.Fields(fields["NSpid"])
				if fields["Name"] == "kubelet" && len(ns) > 1 && ns[len(ns)-1] == strconv.Itoa(want) {
					if ppid, _ := strconv.Atoi(fields["PPid"]); ppid == n.Systemd.PID {
						pid, _ = strconv.Atoi(ns[0])
						return true
					}
				}
			}
			return false
		})
		return pid
	}

	t.Run("the kubelet is kubelet.service, a child of the node's systemd", func(t *testing.T) {
		if got, _ := n.Systemd.Systemctl("is-active", "containerd.service", "kubelet.service"); got != "active\nactive\n" {
			t.Errorf("containerd.service and kubelet.service are %q, want active and active", got)
		}
		pid, err := n.KubeletMainPID()
		if err != nil || pid == 0 {
			t.Fatalf("kubelet.service's MainPID: %d, %v", pid, err)
		}
		status, err := n.Systemd.Exec("cat", fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			t.Fatal(err)
		}
		if got := statusFields(status)["PPid"]; got != "1" {
			t.Errorf("in the node, the kubelet's parent is PID %s, want 1 (systemd)", got)
		}
		if comm, _ := n.Systemd.Exec("cat", "/proc/1/comm"); strings.TrimSpace(comm) != "systemd" {
			t.Errorf("the node's PID 1 is %q, want systemd", comm)
		}
		host := hostPID(t, pid)
		t.Logf("kubelet: PID %d in the node, %d on the host; its parent is the node's systemd, host PID %d", pid, host, n.Systemd.PID)
		// Its command line is the drop-in's, with kubeadm-flags.env.
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", host))
		if err != nil {
			t.Fatal(err)
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		for _, want := range []string{
			"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
			"--kubeconfig=/etc/kubernetes/kubelet.conf",
			"--config=/var/lib/kubelet/config.yaml",
		} {
			if !slices.Contains(args, want) {
				t.Errorf("the kubelet runs without %s: %q", want, args)
			}
		}
	})

	t.Run("kubeadm's files are on the node", func(t *testing.T) {
		cm, err := c.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubelet-config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		config := readFile(t, "/var/lib/kubelet/config.yaml")
		var file, fromCM map[string]any
		if err := yaml.Unmarshal([]byte(config), &file); err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal([]byte(cm.Data["kubelet"]), &fromCM); err != nil {
			t.Fatal(err)
		}
		// kubeadm join fills in the CRI socket it found on the node.
		fromCM["containerRuntimeEndpoint"] = "unix:///var/run/containerd/containerd.sock"
		if diff := cmp.Diff(fromCM, file); diff != "" {
			t.Errorf("/var/lib/kubelet/config.yaml differs from the kubelet-config ConfigMap's kubelet key but for the node's CRI socket (-ConfigMap +file):\n%s", diff)
		}
		for _, want := range []string{"cgroupDriver: systemd", "failCgroupV1: false", "clientCAFile: /etc/kubernetes/pki/ca.crt", "rotateCertificates: true"} {
			if !strings.Contains(config, want) {
				t.Errorf("/var/lib/kubelet/config.yaml lacks %q:\n%s", want, config)
			}
		}
		if flags := readFile(t, "/var/lib/kubelet/kubeadm-flags.env"); !strings.HasPrefix(flags, "KUBELET_KUBEADM_ARGS=") {
			t.Errorf("/var/lib/kubelet/kubeadm-flags.env is %q, want KUBELET_KUBEADM_ARGS=...", flags)
		} else {
			t.Logf("kubeadm-flags.env: %s", strings.TrimSpace(flags))
		}
		dropIn, err := os.ReadFile(filepath.Join(n.UnitDir, "kubelet.service.d", "10-kubeadm.conf"))
		if err != nil {
			t.Fatal(err)
		}
		if cat, err := n.Systemd.Systemctl("cat", "kubelet.service"); err != nil || !strings.Contains(cat, string(dropIn)) {
			t.Errorf("systemctl cat kubelet.service does not show 10-kubeadm.conf (%v):\n%s", err, cat)
		}
		// kubelet.conf is the kubelet's TLS-bootstrapped credential:
		// system:node:NAME's rotating client certificate.
		kc, err := clientcmd.Load([]byte(readFile(t, "/etc/kubernetes/kubelet.conf")))
		if err != nil {
			t.Fatal(err)
		}
		ctxName := kc.CurrentContext
		user := kc.AuthInfos[kc.Contexts[ctxName].AuthInfo]
		if user == nil || user.ClientCertificate != "/var/lib/kubelet/pki/kubelet-client-current.pem" {
			t.Errorf("/etc/kubernetes/kubelet.conf's user is %+v, want the client certificate /var/lib/kubelet/pki/kubelet-client-current.pem", user)
		}
		if server := kc.Clusters[kc.Contexts[ctxName].Cluster].Server; server != c.APIServerURL {
			t.Errorf("/etc/kubernetes/kubelet.conf's server is %s, want %s", server, c.APIServerURL)
		}
		if _, err := os.Stat(n.Path("/etc/kubernetes/pki/ca.crt")); err != nil {
			t.Errorf("kubeadm did not write the cluster's CA: %v", err)
		}
	})

	t.Run("the host's /etc/kubernetes and /var/lib/kubelet are untouched", func(t *testing.T) {
		for _, p := range []string{"/etc/kubernetes", "/var/lib/kubelet"} {
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Errorf("host path %s: %v, want it absent", p, err)
			}
		}
	})

	t.Run("a restart over the node's D-Bus starts a new kubelet", func(t *testing.T) {
		before, err := n.KubeletMainPID()
		if err != nil {
			t.Fatal(err)
		}
		// The agent's --restart=systemd, on the node's system bus, as the
		// DaemonSet reaches the host's; the new kubelet posts its status.
		t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", n.Systemd.BusAddress())
		r := kubelet.NewSystemdRestarter("kubelet.service", 30*time.Second)
		restartReports(t, c, name, func() error { return r.Restart(ctx) })
		after, err := n.KubeletMainPID()
		if err != nil {
			t.Fatal(err)
		}
		if after == 0 || after == before {
			t.Fatalf("kubelet.service's MainPID is %d after the restart, was %d: want a new process", after, before)
		}
		hostPID(t, after)
		t.Logf("kubelet.service restarted: MainPID %d -> %d", before, after)
	})
}

// statusFields parses /proc/PID/status.
func statusFields(status string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(status, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}
