package checkpointtest

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// Write builds, from a Layout, the bytes and modes that the 1.23 kubelet
// left in testdata/upstream-1.23.
func TestWriteIsUpstream123(t *testing.T) {
	copied := t.TempDir()
	l := Upstream123(t, copied)
	built := t.TempDir()
	Write(t, built, l)

	const (
		b = "checkpoints/3f1c9a0e-6b2d-4f8a-9c71-5e0d2b8a4c17"
		a = "checkpoints/9d2e7b41-0c5a-4e36-b8f2-71a4c6e3d905"
	)
	modes := map[string]fs.FileMode{
		".":                    fs.ModeDir | 0o755,
		"meta":                 fs.ModeDir | 0o755,
		"meta/assigned":        0o600,
		"meta/last-known-good": 0o600,
		"checkpoints":          fs.ModeDir | 0o755,
		b:                      fs.ModeDir | 0o755,
		b + "/48213":           fs.ModeDir | 0o700,
		b + "/48213/kubelet":   0o644,
		a:                      fs.ModeDir | 0o755,
		a + "/47790":           fs.ModeDir | 0o700,
		a + "/47790/kubelet":   0o644,
	}
	for what, dir := range map[string]string{"Upstream123": copied, "Write": built} {
		if d := cmp.Diff(modes, Tree(t, filepath.Join(dir, "store"))); d != "" {
			t.Errorf("%s: modes (-want +got):\n%s", what, d)
		}
	}
	for rel, mode := range modes {
		if !mode.IsRegular() {
			continue
		}
		want, err := os.ReadFile(filepath.Join(copied, "store", rel))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(built, "store", rel))
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(string(want), string(got)); d != "" {
			t.Errorf("%s (-kubelet's +Write's):\n%s", rel, d)
		}
	}

	read, err := Read(copied)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(l, read); d != "" {
		t.Errorf("Read of the fixture (-Upstream123 +Read):\n%s", d)
	}
}

// Write and Read agree on every field, and Write leaves a store without a
// record and without the dkc meta files the layout leaves unset.
func TestWriteRead(t *testing.T) {
	src := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: "kube-system", Name: "c", UID: "u", ResourceVersion: "7", KubeletConfigKey: "kubelet",
	}}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	layouts := map[string]Layout{
		"local": {Checkpoints: map[string]map[string][]byte{}},
		"every file": {
			Assigned: src, LastKnownGood: src, AssignedAt: &at, LastError: "failed to validate config, see Kubelet log for details: x",
			Checkpoints: map[string]map[string][]byte{
				"u/7":  {"kubelet": []byte("a"), ".env": []byte("A=1"), "blob.bin": {0, 1, 255}},
				"u/8":  {},
				"v/12": {"kubelet": {}},
			},
		},
	}
	for name, l := range layouts {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			meta := filepath.Join(dir, "store", "meta")
			if err := os.MkdirAll(meta, 0o700); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"state", "assigned-at", "last-error"} {
				if err := os.WriteFile(filepath.Join(meta, f), []byte("left by dkc"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			Write(t, dir, l)
			got, err := Read(dir)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(l, got); d != "" {
				t.Errorf("Read after Write (-want +got):\n%s", d)
			}
			if _, err := os.Stat(filepath.Join(meta, "state")); !os.IsNotExist(err) {
				t.Errorf("meta/state after Write: %v; want none", err)
			}
		})
	}
}

func TestReadRefuses(t *testing.T) {
	tests := map[string]string{
		"not YAML":     "source: [",
		"another kind": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n",
		"no configMap": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: SerializedNodeConfigSource\nsource: {}\n",
	}
	for name, content := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			Write(t, dir, Layout{})
			if err := os.WriteFile(filepath.Join(dir, "store", "meta", "assigned"), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := Read(dir); err == nil {
				t.Errorf("Read of meta/assigned %q: no error", content)
			}
		})
	}
}
