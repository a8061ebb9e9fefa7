package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/pkg/checkpoint"
	"github.com/kubectl-dkc/dkc/pkg/kubeclient"
	"github.com/kubectl-dkc/dkc/pkg/kubelet"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// TestKubeletEffects drives a real kubelet with the node agent's effects:
// the drop-in and replace writers, the exec restarter on the harness's
// restart command, and the health-gate prober, whose kubelet URL comes from
// the kubelet config (the node's address on the harness bridge).
func TestKubeletEffects(t *testing.T) {
	c := framework.Setup(t, framework.Options{Nodes: 1})
	ctx := context.Background()
	n := c.Nodes[0]
	restarter := kubelet.NewExecRestarter([]string{n.RestartCommand}, 30*time.Second)
	kubeletClient, err := kubelet.NewKubeletClient(c.RESTConfig, kubelet.KubeletTLS{CAFile: n.KubeletCAFile(), ServerName: n.Name})
	if err != nil {
		t.Fatal(err)
	}
	apiClient, err := kubeclient.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	prober := kubelet.NewProber(kubelet.ProberConfig{Client: apiClient, NodeName: n.Name, KubeletClient: kubeletClient, Interval: 200 * time.Millisecond})
	original, err := os.ReadFile(n.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}

	// restartAndProbe restarts the kubelet and probes it for want, then
	// checks that the Node's pod capacity is wantPods.
	restartAndProbe := func(t *testing.T, want []byte, wantPods int64) {
		t.Helper()
		starts := n.KubeletStarts()
		since := time.Now()
		if err := restarter.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		restarted := time.Since(since)
		if got := n.KubeletStarts(); got != starts+1 {
			t.Fatalf("kubelet started %d times during Restart, want 1", got-starts)
		}
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := prober.Probe(pctx, kubelet.Expectation{Config: want, Since: since}); err != nil {
			t.Fatal(err)
		}
		t.Logf("restart command took %s; restart to probe pass %s",
			restarted.Round(time.Millisecond), time.Since(since).Round(time.Millisecond))
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				t.Logf("restart at %s; Ready heartbeat %s", since.UTC().Format(time.RFC3339Nano), cond.LastHeartbeatTime.UTC().Format(time.RFC3339))
			}
		}
		if got := node.Status.Capacity.Pods().Value(); got != wantPods {
			t.Errorf("capacity pods = %d after the probe passed, want %d", got, wantPods)
		}
	}

	dropIn := kubelet.NewDropInWriter(n.ConfigPath, n.ConfigDir)
	payload := []byte("kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 42\n")
	// The starting states of the subtests: the kubelet on its own config
	// (noDropIn) or on the drop-in with maxPods 42 (withDropIn), restarted
	// only when it runs something else.
	noDropIn := func(t *testing.T) {
		t.Helper()
		if err := dropIn.Restore(); err != nil {
			t.Fatal(err)
		}
		if configz(t, c, n.Name)["maxPods"] != float64(110) {
			eff, err := dropIn.Effective()
			if err != nil {
				t.Fatal(err)
			}
			restartAndProbe(t, eff, 110)
		}
	}
	withDropIn := func(t *testing.T) []byte {
		t.Helper()
		if err := dropIn.Apply(payload); err != nil {
			t.Fatal(err)
		}
		eff, err := dropIn.Effective()
		if err != nil {
			t.Fatal(err)
		}
		if configz(t, c, n.Name)["maxPods"] != float64(42) {
			restartAndProbe(t, eff, 42)
		}
		return eff
	}

	t.Run("drop-in maxPods, restart, probe", func(t *testing.T) {
		noDropIn(t)
		if err := dropIn.Apply(payload); err != nil {
			t.Fatal(err)
		}
		if got := dirNames(t, n.ConfigDir); got != kubelet.DropInName {
			t.Errorf("config dir holds %q, want only %q", got, kubelet.DropInName)
		}
		eff, err := dropIn.Effective()
		if err != nil {
			t.Fatal(err)
		}
		if got := jsonField(t, eff, "maxPods"); got != float64(42) {
			t.Errorf("effective maxPods = %v, want 42", got)
		}
		if got := jsonField(t, eff, "healthzBindAddress"); got != n.IP {
			t.Errorf("effective healthzBindAddress = %v, want %s (from --config)", got, n.IP)
		}
		restartAndProbe(t, eff, 42)
	})

	t.Run("wrong expectation fails naming the field", func(t *testing.T) {
		eff := withDropIn(t)
		wrong := bytes.Replace(eff, []byte(`"maxPods":42`), []byte(`"maxPods":43`), 1)
		if bytes.Equal(wrong, eff) {
			t.Fatalf("effective config has no maxPods 42: %s", eff)
		}
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		began := time.Now()
		err := prober.Probe(pctx, kubelet.Expectation{Config: wrong, Since: began.Add(-time.Minute)})
		took := time.Since(began)
		if got, want := errString(err), "health gate: configz: maxPods is 42, want 43"; got != want {
			t.Errorf("Probe error = %q, want %q", got, want)
		}
		if took > 5*time.Second {
			t.Errorf("Probe took %s, want it to end with its 3s context", took)
		}
	})

	t.Run("drop-in restore, restart, probe", func(t *testing.T) {
		withDropIn(t)
		if err := dropIn.Restore(); err != nil {
			t.Fatal(err)
		}
		if got := dirNames(t, n.ConfigDir); got != "" {
			t.Errorf("config dir holds %q after Restore, want nothing", got)
		}
		eff, err := dropIn.Effective()
		if err != nil {
			t.Fatal(err)
		}
		restartAndProbe(t, eff, 110)
	})

	t.Run("replace round trip", func(t *testing.T) {
		noDropIn(t)
		store, err := checkpoint.Open(t.TempDir(), clock.RealClock{})
		if err != nil {
			t.Fatal(err)
		}
		rw := kubelet.NewReplaceWriter(n.ConfigPath, store)
		rw.ConfigDir = n.ConfigDir
		before, err := os.Stat(n.ConfigPath)
		if err != nil {
			t.Fatal(err)
		}

		var cfg map[string]any
		if err := yaml.Unmarshal(original, &cfg); err != nil {
			t.Fatal(err)
		}
		cfg["maxPods"] = 77
		// The kubelet renders 90s as "1m30s" in configz; the probe
		// compares durations, not their spelling.
		cfg["syncFrequency"] = "90s"
		edited, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := rw.Apply(edited); err != nil {
			t.Fatal(err)
		}
		after, err := os.Stat(n.ConfigPath)
		if err != nil {
			t.Fatal(err)
		}
		if after.Mode() != before.Mode() {
			t.Errorf("config mode %v after Apply, want %v", after.Mode(), before.Mode())
		}
		if base, ok, err := store.Baseline(kubelet.BaselineName); err != nil || !ok || !bytes.Equal(base, original) {
			t.Errorf("baseline = %q, %v, %v; want the original config", base, ok, err)
		}
		eff, err := rw.Effective()
		if err != nil {
			t.Fatal(err)
		}
		restartAndProbe(t, eff, 77)
		if got := configz(t, c, n.Name)["syncFrequency"]; got != "1m30s" {
			t.Errorf("configz syncFrequency = %v, want 1m30s", got)
		}

		if err := rw.Restore(); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(n.ConfigPath); err != nil || !bytes.Equal(got, original) {
			t.Fatalf("config after Restore = %q, %v; want the original", got, err)
		}
		eff, err = rw.Effective()
		if err != nil {
			t.Fatal(err)
		}
		restartAndProbe(t, eff, 110)
		if got := configz(t, c, n.Name)["syncFrequency"]; got != "1m0s" {
			t.Errorf("configz syncFrequency = %v after Restore, want the default 1m0s", got)
		}
	})
}

// dirNames lists dir's entries, space-separated.
func dirNames(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}

func jsonField(t *testing.T, doc []byte, field string) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatalf("%v: %s", err, doc)
	}
	return m[field]
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
