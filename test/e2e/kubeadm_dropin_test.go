package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// TestKubeadmDropIn runs the agent in drop-in mode on a kubeadm node set up
// as docs/install.md tells an operator to: the kubelet's --config-dir given
// through the JoinConfiguration's nodeRegistration.kubeletExtraArgs, and
// deploy/ applied with one patch that adds --apply-mode=dropin to the
// agent's args. An assigned config that holds only the fields it changes
// becomes the drop-in 50-kubectl-dkc.conf, and kubeadm's
// /var/lib/kubelet/config.yaml stays kubeadm's. A `kubeadm upgrade node
// phase kubelet-config` then replaces only that base file: the kubelet
// merges the drop-in over the new base, and the assignment stays active,
// with no drift. A reset removes the drop-in.
func TestKubeadmDropIn(t *testing.T) {
	c, refs := kubeadmPodsCluster(t)
	ctx := context.Background()
	const confDir = "/etc/kubernetes/kubelet.conf.d"
	n, err := c.StartKubeadmNodeWith(ctx, "dkc-kubeadm-dropin", framework.KubeadmNodeOptions{KubeletConfigDir: confDir})
	if err != nil {
		t.Fatal(err)
	}
	flags, err := os.ReadFile(n.Path("/var/lib/kubelet/kubeadm-flags.env"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(flags), "--config-dir="+confDir) {
		t.Fatalf("kubeadm-flags.env lacks --config-dir=%s:\n%s", confDir, flags)
	}
	base, err := os.ReadFile(n.Path("/var/lib/kubelet/config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The drift check runs every 5 s instead of deploy/'s minute, so that
	// the no-drift check below watches several of them.
	if _, err := c.DeployDKC(ctx, framework.Deploy{
		Overlay:   filepath.Join("..", "..", "deploy"),
		Images:    refs,
		AgentArgs: []string{"--apply-mode=dropin", "--drift-check-interval=5s"},
	}); err != nil {
		t.Fatal(err)
	}
	waitAgentPods(t, c, 2*time.Minute, agentContainerReady)
	dropIn := n.Path(filepath.Join(confDir, "50-kubectl-dkc.conf"))
	// assign assigns a drop-in that sets maxPods and waits until the
	// kubelet runs it.
	assign := func(t *testing.T, cm string, maxPods int) {
		t.Helper()
		createConfigMap(t, c, cm, framework.ConfigWith(t, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"), framework.MaxPods(maxPods)))
		mustDKC(t, c, "", "assign", n.Name, "--config", cm)
		eventuallyStatus(t, c, n.Name, 2*time.Minute, Active(cm), NoError())
		if got := configz(t, c, n.Name)["maxPods"]; got != float64(maxPods) {
			t.Errorf("configz maxPods %v, want %d", got, maxPods)
		}
	}

	t.Run("an assigned config is written as the drop-in; kubeadm's file stays as kubeadm wrote it", func(t *testing.T) {
		assign(t, "dropin-a", 42)
		b, err := os.ReadFile(dropIn)
		if err != nil {
			t.Fatalf("the agent wrote no drop-in: %v", err)
		}
		if !strings.Contains(string(b), "maxPods: 42") {
			t.Errorf("%s lacks maxPods: 42:\n%s", dropIn, b)
		}
		if onDisk, err := os.ReadFile(n.Path("/var/lib/kubelet/config.yaml")); err != nil || !bytes.Equal(onDisk, base) {
			t.Errorf("/var/lib/kubelet/config.yaml changed (err %v):\n%s\nwant kubeadm's:\n%s", err, onDisk, base)
		}
		wantEvent(t, c, n.Name, "Applied")
	})

	t.Run("kubeadm upgrade node phase kubelet-config replaces only the base: the drop-in stays in effect, with no drift", func(t *testing.T) {
		assign(t, "dropin-b", 43)
		// A new kubelet-config, as `kubeadm upgrade apply` of a new
		// version uploads it, then what an operator runs on the node.
		if err := c.UploadKubeletConfig(ctx, framework.KubeadmKubeletConfig+"containerLogMaxFiles: 4\n"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := c.UploadKubeletConfig(ctx, framework.KubeadmKubeletConfig); err != nil {
				t.Errorf("restore kubelet-config: %v", err)
			}
		})
		var out bytes.Buffer
		if err := n.Kubeadm(ctx, &out, "upgrade", "node", "phase", "kubelet-config", "--v=1"); err != nil {
			t.Fatalf("kubeadm upgrade node phase kubelet-config: %v\n%s", err, out.String())
		}
		onDisk, err := os.ReadFile(n.Path("/var/lib/kubelet/config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(onDisk), "containerLogMaxFiles: 4") {
			t.Fatalf("kubeadm did not write the new base:\n%s", onDisk)
		}
		if _, err := n.Systemd.Systemctl("restart", "kubelet.service"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, "configz with the new base's containerLogMaxFiles 4", func() bool {
			return configz(t, c, n.Name)["containerLogMaxFiles"] == float64(4)
		})
		if got := configz(t, c, n.Name)["maxPods"]; got != float64(43) {
			t.Errorf("configz maxPods %v after the upgrade, want the drop-in's 43", got)
		}
		consistently(t, 15*time.Second, "dropin-b active with no error", func() bool {
			st := nodeStatus(t, c, n.Name)
			return st != nil && st.Error == "" && st.Active != nil && st.Active.ConfigMap != nil && st.Active.ConfigMap.Name == "dropin-b"
		})
	})

	t.Run("reset removes the drop-in and leaves kubeadm's file", func(t *testing.T) {
		assign(t, "dropin-c", 44)
		before, err := os.ReadFile(n.Path("/var/lib/kubelet/config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		mustDKC(t, c, "", "reset", n.Name)
		eventuallyStatus(t, c, n.Name, 2*time.Minute, NoStatus())
		waitFor(t, time.Minute, "configz maxPods 110", func() bool { return configz(t, c, n.Name)["maxPods"] == float64(110) })
		if _, err := os.Stat(dropIn); !os.IsNotExist(err) {
			t.Errorf("the drop-in is still there after the reset (stat: %v)", err)
		}
		if after, err := os.ReadFile(n.Path("/var/lib/kubelet/config.yaml")); err != nil || !bytes.Equal(after, before) {
			t.Errorf("the reset changed /var/lib/kubelet/config.yaml (err %v):\n%s\nwant:\n%s", err, after, before)
		}
		wantCondition(t, c, n.Name, "True", "Reset")
	})
}
