package e2e

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubectl-dkc/dkc/pkg/checkpoint/checkpointtest"
	"github.com/kubectl-dkc/dkc/pkg/source"
	dkcstatus "github.com/kubectl-dkc/dkc/pkg/status"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// warningRecorder collects the apiserver's warning headers.
type warningRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningRecorder) HandleWarningHeader(code int, agent, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warningRecorder) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}

// TestLegacyNativeDKC runs the original system side by side with dkc's
// workflow: apiserver and kubelet v1.23.17 with the DynamicKubeletConfig
// gate, where the kubelet's own DKC downloads, checkpoints and restarts on
// the config that dkc snapshots, pushes and assigns through the native
// spec.configSource, and dkc reset sends it back to its local config.
func TestLegacyNativeDKC(t *testing.T) {
	binDir := framework.LegacyBinDir(t)
	const gate = "--feature-gates=DynamicKubeletConfig=true"
	c := framework.Setup(t, framework.Options{
		Nodes:          1,
		BinDir:         binDir,
		EtcdBinDir:     framework.DefaultBinDir(),
		LegacyKubelet:  true,
		APIServerFlags: []string{gate},
		KubeletFlags:   []string{gate},
		NodeKubeletFlags: func(n *framework.Node) []string {
			return []string{"--dynamic-config-dir=" + filepath.Join(n.Dir, "dynamic-config")}
		},
	})
	ctx := context.Background()
	n := c.Nodes[0]
	dynamicConfigDir := filepath.Join(n.Dir, "dynamic-config")

	t.Run("components are v1.23.17 on the harness's etcd 3.7", func(t *testing.T) {
		v, err := c.Client.Discovery().ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		if v.GitVersion != framework.LegacyVersion {
			t.Errorf("apiserver version %q, want %q", v.GitVersion, framework.LegacyVersion)
		}
		node := getNode(t, c, n.Name)
		if got := node.Status.NodeInfo.KubeletVersion; got != framework.LegacyVersion {
			t.Errorf("kubelet version %q, want %q", got, framework.LegacyVersion)
		}
		out, err := exec.Command(filepath.Join(framework.DefaultBinDir(), "etcd"), "--version").CombinedOutput()
		if err != nil {
			t.Fatalf("etcd --version: %v: %s", err, out)
		}
		if !strings.Contains(string(out), "etcd Version: 3.7.") {
			t.Errorf("etcd --version: want 3.7.x, got:\n%s", out)
		}
		t.Logf("apiserver %s, kubelet %s, %s", v.GitVersion, node.Status.NodeInfo.KubeletVersion, strings.SplitN(string(out), "\n", 2)[0])
	})

	// configz on 1.23 has no kind or apiVersion: the snapshot adds them.
	original := configz(t, c, n.Name)
	if _, ok := original["kind"]; ok {
		t.Errorf("configz of kubelet %s has a kind; DESIGN.md says it has none before 1.36", framework.LegacyVersion)
	}
	if got := original["maxPods"]; got != float64(110) {
		t.Fatalf("configz maxPods %v, want 110", got)
	}
	snap := mustDKC(t, c, "", "snapshot", n.Name)
	var cfg map[string]any
	if err := json.Unmarshal([]byte(snap.Stdout), &cfg); err != nil {
		t.Fatalf("snapshot is not JSON: %v\n%s", err, snap.Stdout)
	}
	if cfg["kind"] != "KubeletConfiguration" || cfg["apiVersion"] != "kubelet.config.k8s.io/v1beta1" {
		t.Fatalf("snapshot kind/apiVersion = %v/%v, want KubeletConfiguration/kubelet.config.k8s.io/v1beta1", cfg["kind"], cfg["apiVersion"])
	}
	const editedMaxPods = 57
	cfg["maxPods"] = editedMaxPods
	push := func(name string, cfg map[string]any) *corev1.ConfigMap {
		t.Helper()
		edited, err := json.MarshalIndent(cfg, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "kubelet.json")
		if err := os.WriteFile(file, edited, 0o644); err != nil {
			t.Fatal(err)
		}
		pushed := mustDKC(t, c, "", "push", file, "--name", name, "-o", "name")
		cmName, ok := strings.CutPrefix(strings.TrimSpace(pushed.Stdout), "configmap/")
		if !ok || !strings.HasPrefix(cmName, name+"-") {
			t.Fatalf("push -o name printed %q, want configmap/%s-<hash>", pushed.Stdout, name)
		}
		cm, err := c.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, cmName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm
	}

	// DESIGN.md's caveat, on the original system: configz omits an empty
	// enforceNodeAllocatable, so the snapshot, pushed as it is, defaults it
	// to [pods], which the kubelet rejects without cgroupsPerQOS. dkc push
	// refuses it, naming the field. Put in a ConfigMap by hand, as the old
	// workflow did, the kubelet's DKC keeps its last-known-good (local)
	// config and reports upstream's error string.
	t.Run("an invalid config falls back and reports upstream's error", func(t *testing.T) {
		if _, ok := cfg["enforceNodeAllocatable"]; ok {
			t.Fatalf("snapshot has enforceNodeAllocatable %v; DESIGN.md says configz drops an empty list", cfg["enforceNodeAllocatable"])
		}
		naive, err := json.MarshalIndent(cfg, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		r := dkc(t, c, string(naive), "push", "-", "--name", "legacy-naive")
		if r.ExitCode == 0 || !strings.Contains(r.Stderr, "enforceNodeAllocatable: absent") {
			t.Errorf("push of the naive snapshot: exit %d, stderr %q; want it refused naming enforceNodeAllocatable", r.ExitCode, r.Stderr)
		}
		bad, err := c.Client.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "legacy-naive", Namespace: "kube-system"},
			Data:       map[string]string{"kubelet": string(naive)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r = dkc(t, c, "", "assign", n.Name, "--config", bad.Name, "--wait", "--timeout", "3m")
		if r.ExitCode != dkcstatus.ExitConfigError {
			t.Errorf("assign --wait exit %d, want %d (config error)", r.ExitCode, dkcstatus.ExitConfigError)
		}
		const wantErr = "failed to validate config, see Kubelet log for details"
		if !strings.Contains(r.Stderr, wantErr) {
			t.Errorf("assign stderr lacks %q:\n%s", wantErr, r.Stderr)
		}
		st := getNode(t, c, n.Name).Status.Config
		if st == nil || st.Error != wantErr {
			t.Fatalf("status.config = %s, want error %q", toJSON(st), wantErr)
		}
		if st.Active != nil || st.Assigned == nil || st.Assigned.ConfigMap.UID != bad.UID {
			t.Errorf("status.config = %s, want assigned %s and active nil (the local config)", toJSON(st), bad.Name)
		}
		if got := configz(t, c, n.Name)["maxPods"]; got != float64(110) {
			t.Errorf("configz maxPods %v, want 110 (the local config)", got)
		}
	})

	// The operator's edit restores what the snapshot lost.
	cfg["enforceNodeAllocatable"] = []string{}
	cm := push("legacy-config", cfg)
	cmName := cm.Name

	// The apiserver keeps spec.configSource only with the gate, and then
	// warns that the field is deprecated.
	t.Run("the apiserver keeps spec.configSource and warns", func(t *testing.T) {
		rec := &warningRecorder{}
		cfg := rest.CopyConfig(c.RESTConfig)
		cfg.WarningHandler = rec
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		before := getNode(t, c, n.Name).Spec.ConfigSource
		carrier, err := source.Detect(ctx, client.CoreV1().Nodes(), n.Name)
		if err != nil {
			t.Fatal(err)
		}
		if carrier != source.Native {
			t.Errorf("Detect = %q, want %q", carrier, source.Native)
		}
		if !containsAny(rec.all(), "deprecated") {
			t.Errorf("no deprecation warning on the dry-run patch of spec.configSource; warnings: %q", rec.all())
		}
		t.Logf("warnings: %q", rec.all())
		if got := getNode(t, c, n.Name).Spec.ConfigSource; !equalJSON(got, before) {
			t.Errorf("the dry-run changed spec.configSource from %s to %s", toJSON(before), toJSON(got))
		}
	})

	startsBefore := n.KubeletStarts()
	began := time.Now()
	assigned := mustDKC(t, c, "", "assign", n.Name, "--config", cmName, "--carrier", "auto", "--wait", "--timeout", "3m")
	assignTook := time.Since(began)
	if want := "node/" + n.Name + " assigned kube-system/" + cmName + " (native)"; !strings.Contains(assigned.Stdout, want) {
		t.Errorf("assign stdout %q, want it to contain %q", assigned.Stdout, want)
	}
	if !strings.Contains(assigned.Stderr, "deprecated") {
		t.Errorf("assign stderr does not pass the apiserver's deprecation warning through:\n%s", assigned.Stderr)
	}

	t.Run("the kubelet's own DKC runs the assigned config", func(t *testing.T) {
		node := getNode(t, c, n.Name)
		want := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
			Namespace: "kube-system", Name: cmName, KubeletConfigKey: "kubelet",
		}}
		if !source.Equal(node.Spec.ConfigSource, want) {
			t.Errorf("spec.configSource = %s, want %s", toJSON(node.Spec.ConfigSource), toJSON(want))
		}
		st := node.Status.Config
		if st == nil || st.Active == nil || st.Assigned == nil {
			t.Fatalf("status.config = %s, want active and assigned set", toJSON(st))
		}
		if st.Error != "" {
			t.Errorf("status.config.error = %q", st.Error)
		}
		if !equalJSON(st.Active, st.Assigned) {
			t.Errorf("status.config.active %s != assigned %s", toJSON(st.Active), toJSON(st.Assigned))
		}
		// In status, the kubelet names the exact ConfigMap version.
		if got := st.Active.ConfigMap; got.UID != cm.UID || got.ResourceVersion != cm.ResourceVersion || got.Name != cmName {
			t.Errorf("status.config.active.configMap = %s, want name %s uid %s resourceVersion %s", toJSON(got), cmName, cm.UID, cm.ResourceVersion)
		}
		if got := configz(t, c, n.Name)["maxPods"]; got != float64(editedMaxPods) {
			t.Errorf("configz maxPods %v, want %d", got, editedMaxPods)
		}
		waitFor(t, time.Minute, "capacity pods=57", func() bool {
			return getNode(t, c, n.Name).Status.Capacity.Pods().Value() == editedMaxPods
		})
		// The kubelet restarted by exiting, as it did under systemd.
		if starts := n.KubeletStarts(); starts <= startsBefore {
			t.Errorf("kubelet starts %d, want more than %d: the kubelet did not restart on the new config", starts, startsBefore)
		}

		list := dkcStatus(t, c, n.Name)
		item := list.Items[0]
		if item.Carrier != source.Native {
			t.Errorf("status carrier %q, want %q", item.Carrier, source.Native)
		}
		if !source.Equal(item.ConfigSource, want) {
			t.Errorf("status configSource %s, want %s", toJSON(item.ConfigSource), toJSON(want))
		}
		if item.Status == nil || !equalJSON(item.Status, st) {
			t.Errorf("status .status %s, want the node's status.config %s", toJSON(item.Status), toJSON(st))
		}
	})

	t.Run("the upstream checkpoint store", func(t *testing.T) {
		// checkpointtest reads a store as a 1.23 kubelet does: the
		// real kubelet's store is the reference for that fixture.
		l, err := checkpointtest.Read(dynamicConfigDir)
		if err != nil {
			t.Fatal(err)
		}
		if a := l.Assigned; a == nil || a.ConfigMap == nil || a.ConfigMap.UID != cm.UID || a.ConfigMap.Name != cmName || a.ConfigMap.KubeletConfigKey != "kubelet" {
			t.Errorf("meta/assigned is %s, want ConfigMap %s (uid %s), key kubelet", toJSON(l.Assigned), cmName, cm.UID)
		}
		key := string(cm.UID) + "/" + cm.ResourceVersion
		if got := l.Checkpoints[key]["kubelet"]; string(got) != cm.Data["kubelet"] {
			t.Errorf("checkpoint %s's kubelet differs from the ConfigMap's data; checkpoints: %q", key, slices.Sorted(maps.Keys(l.Checkpoints)))
		}
	})

	startsBefore = n.KubeletStarts()
	began = time.Now()
	reset := mustDKC(t, c, "", "reset", n.Name, "--wait", "--timeout", "3m")
	if want := "node/" + n.Name + " reset to its local config"; !strings.Contains(reset.Stdout, want) {
		t.Errorf("reset stdout %q, want it to contain %q", reset.Stdout, want)
	}
	// --wait may return once status.config shows the local config; the
	// kubelet's config and capacity follow.
	waitFor(t, 2*time.Minute, "configz maxPods=110 after reset", func() bool {
		raw, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", n.Name, "proxy", "configz").DoRaw(ctx)
		if err != nil {
			return false
		}
		var out struct {
			KubeletConfig struct {
				MaxPods int `json:"maxPods"`
			} `json:"kubeletconfig"`
		}
		return json.Unmarshal(raw, &out) == nil && out.KubeletConfig.MaxPods == 110
	})
	resetTook := time.Since(began)

	t.Run("reset returns the kubelet to its local config", func(t *testing.T) {
		node := getNode(t, c, n.Name)
		if node.Spec.ConfigSource != nil {
			t.Errorf("spec.configSource = %s, want none", toJSON(node.Spec.ConfigSource))
		}
		if st := node.Status.Config; st != nil && (st.Active != nil || st.Assigned != nil || st.Error != "") {
			t.Errorf("status.config = %s, want no active, assigned or error (the local config)", toJSON(st))
		}
		waitFor(t, time.Minute, "capacity pods=110", func() bool {
			return getNode(t, c, n.Name).Status.Capacity.Pods().Value() == 110
		})
		if starts := n.KubeletStarts(); starts <= startsBefore {
			t.Errorf("kubelet starts %d, want more than %d: the kubelet did not restart on its local config", starts, startsBefore)
		}
		item := dkcStatus(t, c, n.Name).Items[0]
		if item.ConfigSource != nil {
			t.Errorf("status configSource %s, want none", toJSON(item.ConfigSource))
		}
		if done, err := dkcstatus.Reached(item, dkcstatus.WaitActive); !done || err != nil {
			t.Errorf("Reached(active) = %v, %v after reset; want true, nil", done, err)
		}
		l, err := checkpointtest.Read(dynamicConfigDir)
		if err != nil {
			t.Fatal(err)
		}
		if l.Assigned != nil {
			t.Errorf("meta/assigned is %s after reset, want empty (the local config)", toJSON(l.Assigned))
		}
	})

	t.Logf("upstream DKC latency: assign --wait to active %s (the kubelet's 10 s sync tick plus its restart; DESIGN.md median 10.8 s); reset to local config in configz %s",
		assignTook.Round(time.Millisecond), resetTook.Round(time.Millisecond))
}

func getNode(t *testing.T, c *framework.Cluster, name string) *corev1.Node {
	t.Helper()
	node, err := c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return node
}

// dkcStatus runs `kubectl dkc status NODE -o json` and decodes its list,
// with or without an error.
func dkcStatus(t *testing.T, c *framework.Cluster, node string) dkcstatus.NodeConfigList {
	t.Helper()
	r := readDKC(t, c, "status", node, "-o", "json")
	var list dkcstatus.NodeConfigList
	if err := json.Unmarshal([]byte(r.Stdout), &list); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, r.Stdout)
	}
	if len(list.Items) != 1 || list.Items[0].Name != node {
		t.Fatalf("status -o json: want one item for %s, got %s", node, r.Stdout)
	}
	return list
}

func containsAny(msgs []string, sub string) bool {
	for _, m := range msgs {
		if strings.Contains(m, sub) {
			return true
		}
	}
	return false
}

func toJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func equalJSON(a, b any) bool { return toJSON(a) == toJSON(b) }
