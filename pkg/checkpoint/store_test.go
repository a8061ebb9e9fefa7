package checkpoint

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubectl-dkc/dkc/pkg/status"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)

// source returns a valid ConfigMap source for a checkpoint.
func source(uid, rv string) *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace:        "kube-system",
		Name:             "my-node-config",
		UID:              types.UID(uid),
		ResourceVersion:  rv,
		KubeletConfigKey: "kubelet",
	}}
}

func newStore(t *testing.T) (*Store, string, *clocktesting.FakeClock) {
	t.Helper()
	dir := t.TempDir()
	clk := clocktesting.NewFakeClock(t0)
	s, err := Open(dir, clk)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s, dir, clk
}

// record makes s write through a recordingFS.
func record(s *Store) *recordingFS {
	r := &recordingFS{root: s.Dir()}
	s.fsys = r
	return r
}

// tree returns the mode of everything under root, by relative path.
func tree(t *testing.T, root string) map[string]fs.FileMode {
	t.Helper()
	got := map[string]fs.FileMode{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		got[rel] = fi.Mode()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// temps returns the temporaries anywhere under root.
func temps(t *testing.T, root string) []string {
	t.Helper()
	var got []string
	for p := range tree(t, root) {
		if strings.Contains(p, tmpPrefix) {
			got = append(got, p)
		}
	}
	return got
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestOpenCreatesLayout(t *testing.T) {
	s, dir, clk := newStore(t)
	if got, want := s.Dir(), filepath.Join(dir, "store"); got != want {
		t.Errorf("Dir() = %q, want %q", got, want)
	}
	want := map[string]fs.FileMode{
		".":           fs.ModeDir | 0o700,
		"meta":        fs.ModeDir | 0o700,
		"checkpoints": fs.ModeDir | 0o700,
		"baseline":    fs.ModeDir | 0o700,
		// Empty, like upstream's: the local config.
		"meta/assigned":        0o600,
		"meta/last-known-good": 0o600,
	}
	if diff := cmp.Diff(want, tree(t, s.Dir())); diff != "" {
		t.Errorf("layout (-want +got):\n%s", diff)
	}
	if _, err := Open(dir, clk); err != nil {
		t.Errorf("second Open: %v", err)
	}
	if _, err := Open("", clk); err == nil {
		t.Error("Open(\"\") succeeded, want an error")
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	tests := map[string]struct {
		cm   *corev1.ConfigMap
		want map[string][]byte
	}{
		"data": {
			cm:   &corev1.ConfigMap{Data: map[string]string{"kubelet": "kind: KubeletConfiguration\n", "other": "x"}},
			want: map[string][]byte{"kubelet": []byte("kind: KubeletConfiguration\n"), "other": []byte("x")},
		},
		"binaryData and dotted keys": {
			cm: &corev1.ConfigMap{
				Data:       map[string]string{".env": "A=1", "kubelet": ""},
				BinaryData: map[string][]byte{"blob.bin": {0, 1, 2, 255}},
			},
			want: map[string][]byte{".env": []byte("A=1"), "kubelet": {}, "blob.bin": {0, 1, 2, 255}},
		},
		"empty": {
			cm:   &corev1.ConfigMap{},
			want: map[string][]byte{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, _, _ := newStore(t)
			tc.cm.ObjectMeta = metav1.ObjectMeta{Namespace: "kube-system", Name: "my-node-config", UID: "uid-1", ResourceVersion: "42"}
			src := source("uid-1", "42")
			if ok, err := s.Exists(src); err != nil || ok {
				t.Fatalf("Exists before Save = %v, %v; want false, nil", ok, err)
			}
			if err := s.SaveConfigMap(tc.cm); err != nil {
				t.Fatalf("SaveConfigMap: %v", err)
			}
			got, err := s.Load(src)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Load (-want +got):\n%s", diff)
			}
			if ok, err := s.Exists(src); err != nil || !ok {
				t.Errorf("Exists after Save = %v, %v; want true, nil", ok, err)
			}
			key, err := s.LoadKey(src)
			if want, ok := tc.want["kubelet"]; ok {
				if err != nil {
					t.Fatalf("LoadKey: %v", err)
				}
				if diff := cmp.Diff(want, key); diff != "" {
					t.Errorf("LoadKey (-want +got):\n%s", diff)
				}
			} else if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `key "kubelet"`) {
				t.Errorf("LoadKey error = %v, want key \"kubelet\" not found", err)
			}
		})
	}
}

func TestLoadMissing(t *testing.T) {
	s, _, _ := newStore(t)
	_, err := s.Load(source("uid-1", "1"))
	if got, want := err.Error(), `checkpoint "uid-1/1": not found`; got != want || !errors.Is(err, ErrNotFound) {
		t.Errorf("Load error = %q, want %q wrapping ErrNotFound", got, want)
	}
	_, err = s.LoadKey(source("uid-1", "1"))
	if got, want := err.Error(), `checkpoint "uid-1/1": not found`; got != want || !errors.Is(err, ErrNotFound) {
		t.Errorf("LoadKey error = %q, want %q wrapping ErrNotFound", got, want)
	}
}

func TestSaveConfigMapDuplicateKey(t *testing.T) {
	s, _, _ := newStore(t)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "c", UID: "u", ResourceVersion: "1"},
		Data:       map[string]string{"k": "a"},
		BinaryData: map[string][]byte{"k": []byte("b")},
	}
	err := s.SaveConfigMap(cm)
	if want := `checkpoint "u/1": configMap kube-system/c: key "k" is in both data and binaryData`; err == nil || err.Error() != want {
		t.Errorf("SaveConfigMap error = %v, want %q", err, want)
	}
}

func TestLayoutPathsAndPerms(t *testing.T) {
	s, _, _ := newStore(t)
	if err := s.Save("uid-a", "7", map[string][]byte{"kubelet": []byte("a"), "extra": []byte("b")}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetAssigned(source("uid-a", "7")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetLastKnownGood(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveBaseline("config.yaml", []byte("local")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetLastError("boom"); err != nil {
		t.Fatal(err)
	}
	want := map[string]fs.FileMode{
		".":                           fs.ModeDir | 0o700,
		"meta":                        fs.ModeDir | 0o700,
		"meta/assigned":               0o600,
		"meta/assigned-at":            0o600,
		"meta/last-known-good":        0o600,
		"meta/last-error":             0o600,
		"checkpoints":                 fs.ModeDir | 0o700,
		"checkpoints/uid-a":           fs.ModeDir | 0o700,
		"checkpoints/uid-a/7":         fs.ModeDir | 0o700,
		"checkpoints/uid-a/7/kubelet": 0o600,
		"checkpoints/uid-a/7/extra":   0o600,
		"baseline":                    fs.ModeDir | 0o700,
		"baseline/config.yaml":        0o600,
	}
	if diff := cmp.Diff(want, tree(t, s.Dir())); diff != "" {
		t.Errorf("layout (-want +got):\n%s", diff)
	}

	contents := map[string]string{
		"meta/assigned": `apiVersion: kubelet.config.k8s.io/v1beta1
kind: SerializedNodeConfigSource
source:
  configMap:
    kubeletConfigKey: kubelet
    name: my-node-config
    namespace: kube-system
    resourceVersion: "7"
    uid: uid-a
`,
		"meta/last-known-good": "",
		"meta/assigned-at":     "2026-01-02T03:04:05.123456789Z\n",
		"meta/last-error":      "boom",
	}
	for name, want := range contents {
		got, err := os.ReadFile(filepath.Join(s.Dir(), name))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, string(got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

func TestMetaRoundTrip(t *testing.T) {
	tests := map[string]*corev1.NodeConfigSource{
		"local":     nil,
		"configMap": source("uid-a", "7"),
	}
	for name, src := range tests {
		t.Run(name, func(t *testing.T) {
			s, dir, clk := newStore(t)
			if err := s.SetAssigned(src); err != nil {
				t.Fatalf("SetAssigned: %v", err)
			}
			if err := s.SetLastKnownGood(src); err != nil {
				t.Fatalf("SetLastKnownGood: %v", err)
			}
			// A new Store sees the same state.
			s, err := Open(dir, clk)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Assigned()
			if err != nil {
				t.Fatalf("Assigned: %v", err)
			}
			if diff := cmp.Diff(src, got); diff != "" {
				t.Errorf("Assigned (-want +got):\n%s", diff)
			}
			got, err = s.LastKnownGood()
			if err != nil {
				t.Fatalf("LastKnownGood: %v", err)
			}
			if diff := cmp.Diff(src, got); diff != "" {
				t.Errorf("LastKnownGood (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMetaLocal(t *testing.T) {
	s, _, _ := newStore(t)
	// Missing files mean the local config.
	if got, err := s.Assigned(); err != nil || got != nil {
		t.Errorf("Assigned with no file = %v, %v; want nil, nil", got, err)
	}
	if got, err := s.LastKnownGood(); err != nil || got != nil {
		t.Errorf("LastKnownGood with no file = %v, %v; want nil, nil", got, err)
	}
	// So do empty files, as upstream wrote them.
	if err := s.SetAssigned(source("u", "1")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(s.Dir(), "meta", "assigned"), "")
	if got, err := s.Assigned(); err != nil || got != nil {
		t.Errorf("Assigned with empty file = %v, %v; want nil, nil", got, err)
	}
	// SetAssigned(nil) writes an empty file.
	if err := s.SetAssigned(source("u", "1")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetAssigned(nil); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(s.Dir(), "meta", "assigned"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 0 {
		t.Errorf("meta/assigned has %d bytes, want 0", fi.Size())
	}
}

func TestMetaCorrupt(t *testing.T) {
	tests := map[string]struct {
		content string
		want    string
	}{
		"bad yaml":        {content: "source: [", want: "corrupt: error converting YAML to JSON"},
		"wrong kind":      {content: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n", want: `corrupt: got kind "KubeletConfiguration"`},
		"no kind":         {content: "source:\n  configMap:\n    uid: u\n", want: `corrupt: got kind ""`},
		"old apiVersion":  {content: "apiVersion: kubelet.config.k8s.io/v1alpha1\nkind: SerializedNodeConfigSource\n", want: `apiVersion "kubelet.config.k8s.io/v1alpha1"`},
		"whitespace only": {content: "\n", want: `corrupt: got kind ""`},
		"all nil source": {
			content: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: SerializedNodeConfigSource\nsource: {}\n",
			want:    "corrupt: invalid config source: " + status.AllNilSubfieldsError,
		},
		"no uid": {
			content: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: SerializedNodeConfigSource\nsource:\n  configMap: {namespace: ns, name: cm, resourceVersion: \"1\", kubeletConfigKey: kubelet}\n",
			want:    "corrupt: invalid config source: configMap ns/cm: uid is required",
		},
	}
	for name, tc := range tests {
		for _, file := range []string{"assigned", "last-known-good"} {
			t.Run(name+"/"+file, func(t *testing.T) {
				s, _, _ := newStore(t)
				path := filepath.Join(s.Dir(), "meta", file)
				writeFile(t, path, tc.content)
				get := s.Assigned
				if file == "last-known-good" {
					get = s.LastKnownGood
				}
				_, err := get()
				if err == nil || !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error = %v, want one wrapping ErrCorrupt", err)
				}
				if prefix := `meta file "` + path + `": `; !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error = %q, want prefix %q and %q", err, prefix, tc.want)
				}
				// GC cannot tell what is in use, so it removes nothing.
				if err := s.Save("u", "1", nil); err != nil {
					t.Fatal(err)
				}
				if removed, err := s.GC(); err == nil || len(removed) != 0 {
					t.Errorf("GC = %v, %v; want nothing removed and an error", removed, err)
				}
			})
		}
	}
	// Setting a source overwrites a corrupt file.
	s, _, _ := newStore(t)
	writeFile(t, filepath.Join(s.Dir(), "meta", "assigned"), "garbage: [")
	if err := s.SetAssigned(source("u", "1")); err != nil {
		t.Fatalf("SetAssigned over a corrupt file: %v", err)
	}
	if got, err := s.Assigned(); err != nil || got == nil {
		t.Errorf("Assigned = %v, %v; want the new source", got, err)
	}
}

func TestInvalidSources(t *testing.T) {
	tests := map[string]struct {
		src  *corev1.NodeConfigSource
		want string
	}{
		"all nil": {
			src:  &corev1.NodeConfigSource{},
			want: "invalid config source: " + status.AllNilSubfieldsError,
		},
		"no uid": {
			src:  source("", "1"),
			want: "invalid config source: configMap kube-system/my-node-config: uid is required",
		},
		"no resourceVersion": {
			src:  source("u", ""),
			want: "invalid config source: configMap kube-system/my-node-config: resourceVersion is required",
		},
		"uid escapes": {
			src:  source("../../etc", "1"),
			want: `invalid config source: configMap kube-system/my-node-config: uid: invalid key "../../etc": must be a base name, without "/"`,
		},
		"resourceVersion dot dot": {
			src:  source("u", ".."),
			want: `invalid config source: configMap kube-system/my-node-config: resourceVersion: invalid key "..": must not be ".."`,
		},
		"uid looks temporary": {
			src:  source(tmpPrefix+"X", "1"),
			want: `uid: invalid key ".dkc-tmp-X": must not start with ".dkc-tmp-"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, _, _ := newStore(t)
			calls := map[string]func() error{
				"Load":             func() error { _, err := s.Load(tc.src); return err },
				"LoadKey":          func() error { _, err := s.LoadKey(tc.src); return err },
				"Exists":           func() error { _, err := s.Exists(tc.src); return err },
				"SetAssigned":      func() error { return s.SetAssigned(tc.src) },
				"SetLastKnownGood": func() error { return s.SetLastKnownGood(tc.src) },
			}
			for call, f := range calls {
				err := f()
				if !errors.Is(err, ErrInvalidSource) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s error = %v, want one wrapping ErrInvalidSource containing %q", call, err, tc.want)
				}
			}
			if diff := cmp.Diff([]string(nil), temps(t, s.Dir())); diff != "" {
				t.Errorf("temporaries (-want +got):\n%s", diff)
			}
			if fi, err := os.Stat(filepath.Join(s.Dir(), "meta", "assigned")); err != nil || fi.Size() != 0 {
				t.Errorf("meta/assigned was written: %v", err)
			}
		})
	}
	// Meta files need the whole reference.
	s, _, _ := newStore(t)
	src := source("u", "1")
	src.ConfigMap.KubeletConfigKey = ""
	if err := s.SetAssigned(src); !errors.Is(err, ErrInvalidSource) || !strings.Contains(err.Error(), "kubeletConfigKey: invalid key: must not be empty") {
		t.Errorf("SetAssigned without kubeletConfigKey: %v", err)
	}
}

func TestSaveInvalid(t *testing.T) {
	tests := map[string]struct {
		uid, rv string
		files   map[string][]byte
		want    string
	}{
		"empty key":     {uid: "u", rv: "1", files: map[string][]byte{"ok": nil, "": nil}, want: `checkpoint "u/1": invalid key: must not be empty`},
		"dot":           {uid: "u", rv: "1", files: map[string][]byte{".": nil}, want: `checkpoint "u/1": invalid key ".": must not be "."`},
		"dot dot":       {uid: "u", rv: "1", files: map[string][]byte{"..": nil}, want: `checkpoint "u/1": invalid key "..": must not be ".."`},
		"slash":         {uid: "u", rv: "1", files: map[string][]byte{"a": nil, "a/b": nil}, want: `checkpoint "u/1": invalid key "a/b": must be a base name, without "/"`},
		"too long":      {uid: "u", rv: "1", files: map[string][]byte{strings.Repeat("k", 256): nil}, want: "longer than 255 bytes"},
		"empty uid":     {uid: "", rv: "1", files: map[string][]byte{"k": nil}, want: `checkpoint "/1": uid: invalid key: must not be empty`},
		"rv with slash": {uid: "u", rv: "1/2", files: map[string][]byte{"k": nil}, want: `checkpoint "u/1/2": resourceVersion: invalid key "1/2"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, _, _ := newStore(t)
			r := record(s)
			err := s.Save(types.UID(tc.uid), tc.rv, tc.files)
			if !errors.Is(err, ErrInvalidKey) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Save error = %v, want one wrapping ErrInvalidKey containing %q", err, tc.want)
			}
			if len(r.ops) != 0 {
				t.Errorf("Save wrote %v, want nothing", r.ops)
			}
		})
	}
	s, _, _ := newStore(t)
	if err := s.Save("u", "1", map[string][]byte{strings.Repeat("k", 255): []byte("x")}); err != nil {
		t.Errorf("Save with a 255-byte key: %v", err)
	}
}

func TestWriteSequence(t *testing.T) {
	s, _, _ := newStore(t)
	r := record(s)
	if err := s.SetLastKnownGood(source("u", "1")); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"create meta/<tmp>",
		"write meta/<tmp>",
		"sync meta/<tmp>",
		"close meta/<tmp>",
		"rename meta/<tmp> meta/last-known-good",
		"syncdir meta",
	}
	if diff := cmp.Diff(want, r.ops); diff != "" {
		t.Errorf("SetLastKnownGood ops (-want +got):\n%s", diff)
	}

	r.ops = nil
	if err := s.Save("u", "1", map[string][]byte{"b": []byte("2"), "a": []byte("1")}); err != nil {
		t.Fatal(err)
	}
	want = []string{
		"mkdir checkpoints/u",
		"syncdir checkpoints",
		"mkdir checkpoints/u/<tmp>",
		"create checkpoints/u/<tmp>/a",
		"write checkpoints/u/<tmp>/a",
		"sync checkpoints/u/<tmp>/a",
		"close checkpoints/u/<tmp>/a",
		"create checkpoints/u/<tmp>/b",
		"write checkpoints/u/<tmp>/b",
		"sync checkpoints/u/<tmp>/b",
		"close checkpoints/u/<tmp>/b",
		"syncdir checkpoints/u/<tmp>",
		"rename checkpoints/u/<tmp> checkpoints/u/1",
		"syncdir checkpoints/u",
	}
	if diff := cmp.Diff(want, r.ops); diff != "" {
		t.Errorf("Save ops (-want +got):\n%s", diff)
	}

	// The same content again writes nothing.
	r.ops = nil
	if err := s.Save("u", "1", map[string][]byte{"b": []byte("2"), "a": []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if len(r.ops) != 0 {
		t.Errorf("second Save wrote %v, want nothing", r.ops)
	}

	// Other content replaces the checkpoint as a whole.
	r.ops = nil
	if err := s.Save("u", "1", map[string][]byte{"c": []byte("3")}); err != nil {
		t.Fatal(err)
	}
	want = []string{
		"mkdir checkpoints/u/<tmp>",
		"create checkpoints/u/<tmp>/c",
		"write checkpoints/u/<tmp>/c",
		"sync checkpoints/u/<tmp>/c",
		"close checkpoints/u/<tmp>/c",
		"syncdir checkpoints/u/<tmp>",
		"rename checkpoints/u/1 checkpoints/u/<tmp>",
		"rename checkpoints/u/<tmp> checkpoints/u/1",
		"syncdir checkpoints/u",
		"removeall checkpoints/u/<tmp>",
	}
	if diff := cmp.Diff(want, r.ops); diff != "" {
		t.Errorf("replacing Save ops (-want +got):\n%s", diff)
	}
	got, err := s.Load(source("u", "1"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]byte{"c": []byte("3")}, got); diff != "" {
		t.Errorf("Load after replace (-want +got):\n%s", diff)
	}
}

// TestCrashBeforeRename simulates a crash after the temporary file is
// written and synced but before it is renamed into place.
func TestCrashBeforeRename(t *testing.T) {
	s, dir, clk := newStore(t)
	old := source("u", "1")
	if err := s.SetLastKnownGood(old); err != nil {
		t.Fatal(err)
	}
	r := record(s)
	r.crashAt = func(_ int, op string) bool { return strings.HasPrefix(op, "rename ") }
	if err := s.SetLastKnownGood(source("u", "2")); !errors.Is(err, errCrashed) {
		t.Fatalf("SetLastKnownGood error = %v, want the simulated crash", err)
	}
	if diff := cmp.Diff([]string{"meta/<tmp>"}, tmpNames(t, s.Dir())); diff != "" {
		t.Errorf("temporaries after the crash (-want +got):\n%s", diff)
	}

	s, err := Open(dir, clk)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.LastKnownGood()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(old, got); diff != "" {
		t.Errorf("LastKnownGood after the crash (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string(nil), temps(t, s.Dir())); diff != "" {
		t.Errorf("temporaries after Open (-want +got):\n%s", diff)
	}
}

func tmpNames(t *testing.T, root string) []string {
	t.Helper()
	var got []string
	for _, p := range temps(t, root) {
		got = append(got, tmpRE.ReplaceAllString(p, "<tmp>"))
	}
	return got
}

// TestCrashAtEveryStep crashes each operation at each of its steps and
// checks that, once reopened, the store shows either the old or the new
// state, and no temporaries.
func TestCrashAtEveryStep(t *testing.T) {
	type state struct {
		Assigned, LKG *corev1.NodeConfigSource
		Checkpoints   map[string]string
		Baseline      string
	}
	files := func(v string) map[string][]byte { return map[string][]byte{"kubelet": []byte(v), "x": []byte(v)} }
	setup := func(t *testing.T, s *Store) {
		t.Helper()
		for _, err := range []error{
			s.Save("u", "1", files("one")),
			s.Save("u", "2", files("two")),
			s.Save("v", "1", files("v")),
			s.SetAssigned(source("u", "1")),
			s.SetLastKnownGood(source("u", "1")),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// without returns st without the checkpoint uid/rv.
	without := func(st state, id string) state {
		st.Checkpoints = maps.Clone(st.Checkpoints)
		maps.DeleteFunc(st.Checkpoints, func(p, _ string) bool { return p == id || strings.HasPrefix(p, id+"/") })
		return st
	}
	oldOrNew := func(before, after, got state) bool { return cmp.Equal(before, got) || cmp.Equal(after, got) }
	ops := map[string]struct {
		// prepare, if set, runs after setup, before the operation.
		prepare func(s *Store) error
		op      func(s *Store) error
		// accept reports whether got is a consistent state after a crash.
		accept func(before, after, got state) bool
	}{
		"SetAssigned":      {op: func(s *Store) error { return s.SetAssigned(source("u", "2")) }, accept: oldOrNew},
		"SetLastKnownGood": {op: func(s *Store) error { return s.SetLastKnownGood(nil) }, accept: oldOrNew},
		"Save new":         {op: func(s *Store) error { return s.Save("w", "9", files("new")) }, accept: oldOrNew},
		"SaveBaseline":     {op: func(s *Store) error { _, err := s.SaveBaseline("config", []byte("local")); return err }, accept: oldOrNew},
		"RemoveBaseline": {
			prepare: func(s *Store) error { _, err := s.SaveBaseline("config", []byte("local")); return err },
			op:      func(s *Store) error { return s.RemoveBaseline("config") },
			accept:  oldOrNew,
		},
		"Save replace": {
			op: func(s *Store) error { return s.Save("u", "2", files("changed")) },
			// Between moving the old checkpoint aside and renaming the new
			// one into place, there is none; the agent downloads it again.
			accept: func(before, after, got state) bool {
				return oldOrNew(before, after, got) || cmp.Equal(without(before, "u/2"), got)
			},
		},
		"GC": {
			op: func(s *Store) error { _, err := s.GC(); return err },
			// GC removes checkpoints one at a time, each atomically.
			accept: func(before, after, got state) bool {
				for _, id := range []string{"u/2", "v/1"} {
					if _, ok := got.Checkpoints[id]; !ok {
						before = without(before, id)
					}
				}
				return cmp.Equal(before, got)
			},
		},
	}
	snapshot := func(t *testing.T, dir string) state {
		t.Helper()
		s, err := Open(dir, clocktesting.NewFakeClock(t0))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		var st state
		if st.Assigned, err = s.Assigned(); err != nil {
			t.Fatal(err)
		}
		if st.LKG, err = s.LastKnownGood(); err != nil {
			t.Fatal(err)
		}
		st.Checkpoints = map[string]string{}
		for p, mode := range tree(t, filepath.Join(s.Dir(), "checkpoints")) {
			if !strings.Contains(p, "/") {
				// An empty uid directory holds no checkpoint; GC removes it.
				continue
			}
			st.Checkpoints[p] = mode.String()
			if mode.IsRegular() {
				data, err := os.ReadFile(filepath.Join(s.Dir(), "checkpoints", p))
				if err != nil {
					t.Fatal(err)
				}
				st.Checkpoints[p] += " " + string(data)
			}
		}
		b, _, err := s.Baseline("config")
		if err != nil {
			t.Fatal(err)
		}
		st.Baseline = string(b)
		if diff := cmp.Diff([]string(nil), temps(t, s.Dir())); diff != "" {
			t.Errorf("temporaries after Open (-want +got):\n%s", diff)
		}
		return st
	}
	for name, tc := range ops {
		t.Run(name, func(t *testing.T) {
			// A run without a crash gives the old state, the new one and
			// the number of steps.
			s, dir, _ := newStore(t)
			setup(t, s)
			if tc.prepare != nil {
				if err := tc.prepare(s); err != nil {
					t.Fatal(err)
				}
			}
			before := snapshot(t, dir)
			r := record(s)
			if err := tc.op(s); err != nil {
				t.Fatal(err)
			}
			after := snapshot(t, dir)
			steps := len(r.ops)
			if steps == 0 {
				t.Fatal("the operation wrote nothing")
			}
			// The operation changed something, or else the test proves
			// nothing.
			if cmp.Equal(before, after) {
				t.Fatal("old and new states are equal")
			}
			for i := range steps {
				s, dir, _ := newStore(t)
				setup(t, s)
				if tc.prepare != nil {
					if err := tc.prepare(s); err != nil {
						t.Fatal(err)
					}
				}
				r := record(s)
				r.crashAt = func(n int, _ string) bool { return n == i }
				if err := tc.op(s); !errors.Is(err, errCrashed) {
					t.Fatalf("crash at step %d: error = %v, want the simulated crash", i, err)
				}
				got := snapshot(t, dir)
				if !tc.accept(before, after, got) {
					t.Errorf("crash before step %d: inconsistent state; diff from old (-old +got):\n%s\nsteps done: %q", i, cmp.Diff(before, got), r.ops)
				}
			}
		})
	}
}

func TestGC(t *testing.T) {
	s, _, _ := newStore(t)
	for _, c := range []struct{ uid, rv string }{{"a", "1"}, {"a", "2"}, {"a", "3"}, {"b", "1"}, {"c", "5"}} {
		if err := s.Save(types.UID(c.uid), c.rv, map[string][]byte{"kubelet": []byte(c.uid + c.rv)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetAssigned(source("a", "2")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetLastKnownGood(source("c", "5")); err != nil {
		t.Fatal(err)
	}
	removed, err := s.GC()
	if err != nil {
		t.Fatalf("GC: %v", err)
	}
	cp := filepath.Join(s.Dir(), "checkpoints")
	want := []string{filepath.Join(cp, "a", "1"), filepath.Join(cp, "a", "3"), filepath.Join(cp, "b", "1")}
	if diff := cmp.Diff(want, removed); diff != "" {
		t.Errorf("GC removed (-want +got):\n%s", diff)
	}
	wantTree := map[string]fs.FileMode{
		".":           fs.ModeDir | 0o700,
		"a":           fs.ModeDir | 0o700,
		"a/2":         fs.ModeDir | 0o700,
		"a/2/kubelet": 0o600,
		"c":           fs.ModeDir | 0o700,
		"c/5":         fs.ModeDir | 0o700,
		"c/5/kubelet": 0o600,
	}
	if diff := cmp.Diff(wantTree, tree(t, cp)); diff != "" {
		t.Errorf("checkpoints after GC (-want +got):\n%s", diff)
	}

	// With both meta files local, everything goes, uid directories too.
	if err := s.SetAssigned(nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SetLastKnownGood(nil); err != nil {
		t.Fatal(err)
	}
	if removed, err = s.GC(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{filepath.Join(cp, "a", "2"), filepath.Join(cp, "c", "5")}, removed); diff != "" {
		t.Errorf("second GC removed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]fs.FileMode{".": fs.ModeDir | 0o700}, tree(t, cp)); diff != "" {
		t.Errorf("checkpoints after second GC (-want +got):\n%s", diff)
	}
}

func TestAssignedAt(t *testing.T) {
	s, dir, clk := newStore(t)
	check := func(step string, want time.Time) {
		t.Helper()
		got, ok, err := s.AssignedAt()
		if err != nil || !ok || !got.Equal(want) {
			t.Errorf("%s: AssignedAt = %v, %v, %v; want %v, true, nil", step, got, ok, err, want)
		}
	}
	if _, ok, err := s.AssignedAt(); ok || err != nil {
		t.Errorf("AssignedAt on a new store = %v, %v; want false, nil", ok, err)
	}

	if err := s.SetAssigned(source("u", "1")); err != nil {
		t.Fatal(err)
	}
	check("first assignment", t0)

	clk.Step(time.Minute)
	if err := s.SetAssigned(source("u", "1")); err != nil {
		t.Fatal(err)
	}
	check("same source", t0)

	// The time survives a restart.
	clk.Step(time.Minute)
	var err error
	if s, err = Open(dir, clk); err != nil {
		t.Fatal(err)
	}
	check("after reopen", t0)

	if err := s.SetAssigned(source("u", "2")); err != nil {
		t.Fatal(err)
	}
	check("new resourceVersion", t0.Add(2*time.Minute))

	clk.Step(time.Minute)
	if err := s.SetAssigned(nil); err != nil {
		t.Fatal(err)
	}
	check("local", t0.Add(3*time.Minute))

	clk.Step(time.Minute)
	if err := s.SetAssigned(nil); err != nil {
		t.Fatal(err)
	}
	check("local again", t0.Add(3*time.Minute))

	// A store written by a kubelet has no assigned-at: the trial starts now.
	if err := os.Remove(filepath.Join(s.Dir(), "meta", "assigned-at")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetAssigned(nil); err != nil {
		t.Fatal(err)
	}
	check("no assigned-at", t0.Add(4*time.Minute))

	writeFile(t, filepath.Join(s.Dir(), "meta", "assigned-at"), "yesterday")
	if _, _, err := s.AssignedAt(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "meta/assigned-at") {
		t.Errorf("AssignedAt on a corrupt file: error = %v, want one wrapping ErrCorrupt naming the file", err)
	}
	if err := s.SetAssigned(nil); err != nil {
		t.Fatal(err)
	}
	check("corrupt assigned-at", t0.Add(4*time.Minute))
}

func TestBaseline(t *testing.T) {
	s, _, _ := newStore(t)
	if _, ok, err := s.Baseline("config"); ok || err != nil {
		t.Errorf("Baseline before save: ok = %v, err = %v; want false, nil", ok, err)
	}
	for i, data := range []string{"original", "later"} {
		saved, err := s.SaveBaseline("config", []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		if want := i == 0; saved != want {
			t.Errorf("SaveBaseline #%d saved = %v, want %v", i+1, saved, want)
		}
	}
	got, ok, err := s.Baseline("config")
	if err != nil || !ok {
		t.Fatalf("Baseline: ok = %v, err = %v", ok, err)
	}
	if diff := cmp.Diff("original", string(got)); diff != "" {
		t.Errorf("Baseline (-want +got):\n%s", diff)
	}
	if _, err := s.SaveBaseline("../config", nil); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("SaveBaseline(\"../config\") error = %v, want ErrInvalidKey", err)
	}

	// Removed, it is saved again: the next takeover captures the file anew.
	r := record(s)
	if err := s.RemoveBaseline("config"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"remove baseline/config", "syncdir baseline"}, r.ops); diff != "" {
		t.Errorf("RemoveBaseline ops (-want +got):\n%s", diff)
	}
	if _, ok, err := s.Baseline("config"); ok || err != nil {
		t.Errorf("Baseline after remove: ok = %v, err = %v; want false, nil", ok, err)
	}
	r.ops = nil
	if err := s.RemoveBaseline("config"); err != nil {
		t.Errorf("RemoveBaseline of a missing baseline: %v", err)
	}
	if len(r.ops) != 0 {
		t.Errorf("RemoveBaseline of a missing baseline wrote %v, want nothing", r.ops)
	}
	if saved, err := s.SaveBaseline("config", []byte("edited")); err != nil || !saved {
		t.Errorf("SaveBaseline after remove: saved = %v, err = %v; want true, nil", saved, err)
	}
	if got, _, _ := s.Baseline("config"); string(got) != "edited" {
		t.Errorf("Baseline after remove and save = %q, want %q", got, "edited")
	}
	if err := s.RemoveBaseline("../config"); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("RemoveBaseline(\"../config\") error = %v, want ErrInvalidKey", err)
	}
}

func TestLastError(t *testing.T) {
	s, _, _ := newStore(t)
	for _, msg := range []string{"", status.LoadError + ": boom", ""} {
		if err := s.SetLastError(msg); err != nil {
			t.Fatal(err)
		}
		got, err := s.LastError()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(msg, got); diff != "" {
			t.Errorf("LastError (-want +got):\n%s", diff)
		}
	}
}
