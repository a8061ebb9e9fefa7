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
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubectl-dkc/dkc/pkg/checkpoint/checkpointtest"
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

// readOlder reads the store under dir as a kubelet or an older dkc reads
// it: upstream's meta files, dkc's older ones and the checkpoints.
func readOlder(t *testing.T, dir string) checkpointtest.Layout {
	t.Helper()
	l, err := checkpointtest.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// temps returns the temporaries anywhere under root.
func temps(t *testing.T, root string) []string {
	t.Helper()
	var got []string
	for p := range checkpointtest.Tree(t, root) {
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
	if diff := cmp.Diff(want, checkpointtest.Tree(t, s.Dir())); diff != "" {
		t.Errorf("layout (-want +got):\n%s", diff)
	}
	if _, err := Open(dir, clk); err != nil {
		t.Errorf("second Open: %v", err)
	}
	if _, err := Open("", clk); err == nil {
		t.Error("Open(\"\") succeeded, want an error")
	}
}

func TestSaveRoundTrip(t *testing.T) {
	tests := map[string]map[string][]byte{
		"text":                   {"kubelet": []byte("kind: KubeletConfiguration\n"), "other": []byte("x")},
		"binary and dotted keys": {".env": []byte("A=1"), "kubelet": {}, "blob.bin": {0, 1, 2, 255}},
		"empty":                  {},
	}
	for name, files := range tests {
		t.Run(name, func(t *testing.T) {
			s, dir, _ := newStore(t)
			src := source("uid-1", "42")
			if _, err := s.LoadKey(src); err == nil || err.Error() != `checkpoint "uid-1/42": not found` {
				t.Fatalf("LoadKey before Save: %v; want no checkpoint", err)
			}
			if err := s.Save("uid-1", "42", files); err != nil {
				t.Fatalf("Save: %v", err)
			}
			// The checkpoint as a kubelet reads it.
			if diff := cmp.Diff(map[string]map[string][]byte{"uid-1/42": files}, readOlder(t, dir).Checkpoints); diff != "" {
				t.Errorf("checkpoints (-want +got):\n%s", diff)
			}
			key, err := s.LoadKey(src)
			if want, ok := files["kubelet"]; ok {
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

func TestLoadKeyMissing(t *testing.T) {
	s, _, _ := newStore(t)
	_, err := s.LoadKey(source("uid-1", "1"))
	if got, want := err.Error(), `checkpoint "uid-1/1": not found`; got != want || !errors.Is(err, ErrNotFound) {
		t.Errorf("LoadKey error = %q, want %q wrapping ErrNotFound", got, want)
	}
}

func TestLayoutPathsAndPerms(t *testing.T) {
	s, _, _ := newStore(t)
	if err := s.Save("uid-a", "7", map[string][]byte{"kubelet": []byte("a"), "extra": []byte("b")}); err != nil {
		t.Fatal(err)
	}
	at := t0
	a := source("uid-a", "7")
	if err := s.SetState(State{Assigned: a, AssignedAt: &at, Active: a, Error: "boom", ErrorSource: a}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveBaseline("config.yaml", []byte("local")); err != nil {
		t.Fatal(err)
	}
	want := map[string]fs.FileMode{
		".":                           fs.ModeDir | 0o700,
		"meta":                        fs.ModeDir | 0o700,
		"meta/state":                  0o600,
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
	if diff := cmp.Diff(want, checkpointtest.Tree(t, s.Dir())); diff != "" {
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

// A store that a 1.23 kubelet wrote opens as it is: the store adopts its
// assignment and last-known-good, and loads and keeps their checkpoints.
// Upstream's meta files that SetState derives are byte for byte the
// kubelet's.
func TestUpstream123Store(t *testing.T) {
	dir := t.TempDir()
	l := checkpointtest.Upstream123(t, dir)
	meta := map[string][]byte{}
	for _, name := range []string{"assigned", "last-known-good"} {
		data, err := os.ReadFile(filepath.Join(dir, "store", "meta", name))
		if err != nil {
			t.Fatal(err)
		}
		meta[name] = data
	}
	s, err := Open(dir, clocktesting.NewFakeClock(t0))
	if err != nil {
		t.Fatal(err)
	}
	st, adopted, err := s.State()
	if err != nil || !adopted {
		t.Fatalf("State = adopted %v, %v; want the store adopted", adopted, err)
	}
	want := State{Assigned: l.Assigned, LastKnownGood: l.LastKnownGood, Active: l.Assigned}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("adopted record (-want +got):\n%s", diff)
	}
	for _, src := range []*corev1.NodeConfigSource{l.Assigned, l.LastKnownGood} {
		got, err := s.LoadKey(src)
		if err != nil {
			t.Fatal(err)
		}
		id := string(src.ConfigMap.UID) + "/" + src.ConfigMap.ResourceVersion
		if diff := cmp.Diff(l.Checkpoints[id]["kubelet"], got); diff != "" {
			t.Errorf("LoadKey %s (-want +got):\n%s", id, diff)
		}
	}
	if removed, err := s.GC(); err != nil || len(removed) != 0 {
		t.Errorf("GC = %v, %v; want nothing removed", removed, err)
	}

	// Empty them (the local config), then derive them again.
	for _, rec := range []State{{}, st} {
		if err := s.SetState(rec); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range meta {
		got, err := os.ReadFile(filepath.Join(dir, "store", "meta", name))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("meta/%s derived from the adopted record (-kubelet's +dkc's):\n%s", name, diff)
		}
	}
}

// Upstream's meta files round-trip: what SetState derives, a kubelet reads;
// what a kubelet wrote, the store adopts.
func TestMetaRoundTrip(t *testing.T) {
	tests := map[string]*corev1.NodeConfigSource{
		"local":     nil,
		"configMap": source("uid-a", "7"),
	}
	for name, src := range tests {
		t.Run(name, func(t *testing.T) {
			s, dir, clk := newStore(t)
			st := State{Assigned: src, LastKnownGood: src, Active: src}
			if err := s.SetState(st); err != nil {
				t.Fatalf("SetState: %v", err)
			}
			// A new Store sees the same state.
			s, err := Open(dir, clk)
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := s.State()
			if err != nil {
				t.Fatalf("State: %v", err)
			}
			if diff := cmp.Diff(st, got); diff != "" {
				t.Errorf("State (-want +got):\n%s", diff)
			}
			older := readOlder(t, dir)
			if diff := cmp.Diff(src, older.Assigned); diff != "" {
				t.Errorf("meta/assigned as a kubelet reads it (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(src, older.LastKnownGood); diff != "" {
				t.Errorf("meta/last-known-good as a kubelet reads it (-want +got):\n%s", diff)
			}

			dir = t.TempDir()
			checkpointtest.Write(t, dir, checkpointtest.Layout{Assigned: src, LastKnownGood: src})
			if s, err = Open(dir, clk); err != nil {
				t.Fatal(err)
			}
			got, adopted, err := s.State()
			if err != nil || !adopted {
				t.Fatalf("State of a kubelet's store = adopted %v, %v", adopted, err)
			}
			if diff := cmp.Diff(src, got.Assigned); diff != "" {
				t.Errorf("adopted assigned (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(src, got.LastKnownGood); diff != "" {
				t.Errorf("adopted last-known-good (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMetaLocal(t *testing.T) {
	s, dir, _ := newStore(t)
	// Missing files mean the local config.
	for _, name := range []string{"assigned", "last-known-good"} {
		if err := os.Remove(filepath.Join(s.Dir(), "meta", name)); err != nil {
			t.Fatal(err)
		}
	}
	if st, _, err := s.State(); err != nil || st.Assigned != nil || st.LastKnownGood != nil {
		t.Errorf("State with no files = %v, %v, %v; want nil, nil, nil", st.Assigned, st.LastKnownGood, err)
	}
	// So do empty files, as upstream wrote them.
	checkpointtest.Write(t, dir, checkpointtest.Layout{Assigned: source("u", "1")})
	writeFile(t, filepath.Join(s.Dir(), "meta", "assigned"), "")
	if st, _, err := s.State(); err != nil || st.Assigned != nil {
		t.Errorf("State with an empty meta/assigned = %v, %v; want nil, nil", st.Assigned, err)
	}
	// SetState derives an empty file for the local config.
	if err := s.SetState(State{Assigned: source("u", "1"), Active: source("u", "1")}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetState(State{}); err != nil {
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
				// A store without a record: State reads the file.
				s, _, _ := newStore(t)
				path := filepath.Join(s.Dir(), "meta", file)
				writeFile(t, path, tc.content)
				_, _, err := s.State()
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
	// Setting a state overwrites a corrupt file.
	s, dir, _ := newStore(t)
	writeFile(t, filepath.Join(s.Dir(), "meta", "assigned"), "garbage: [")
	if err := s.SetState(State{Assigned: source("u", "1"), Active: source("u", "1")}); err != nil {
		t.Fatalf("SetState over a corrupt meta/assigned: %v", err)
	}
	if got := readOlder(t, dir).Assigned; got == nil {
		t.Errorf("meta/assigned = %v; want the new source", got)
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
				"LoadKey":                  func() error { _, err := s.LoadKey(tc.src); return err },
				"SetState assigned":        func() error { return s.SetState(State{Assigned: tc.src}) },
				"SetState last-known-good": func() error { return s.SetState(State{LastKnownGood: tc.src}) },
				"SetState active":          func() error { return s.SetState(State{Active: tc.src}) },
				"SetState errorSource":     func() error { return s.SetState(State{Error: "x", ErrorSource: tc.src}) },
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
			if _, err := os.Stat(filepath.Join(s.Dir(), "meta", "state")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("meta/state was written: %v", err)
			}
		})
	}
	// Meta files need the whole reference.
	s, _, _ := newStore(t)
	src := source("u", "1")
	src.ConfigMap.KubeletConfigKey = ""
	if err := s.SetState(State{Assigned: src}); !errors.Is(err, ErrInvalidSource) || !strings.Contains(err.Error(), "kubeletConfigKey: invalid key: must not be empty") {
		t.Errorf("SetState of an assignment without kubeletConfigKey: %v", err)
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
	s, dir, _ := newStore(t)
	r := record(s)
	if err := s.SetState(State{LastKnownGood: source("u", "1")}); err != nil {
		t.Fatal(err)
	}
	// The record, then the one upstream file derived from it that changed.
	want := []string{
		"create meta/<tmp>",
		"write meta/<tmp>",
		"sync meta/<tmp>",
		"close meta/<tmp>",
		"rename meta/<tmp> meta/state",
		"syncdir meta",
		"create meta/<tmp>",
		"write meta/<tmp>",
		"sync meta/<tmp>",
		"close meta/<tmp>",
		"rename meta/<tmp> meta/last-known-good",
		"syncdir meta",
	}
	if diff := cmp.Diff(want, r.ops); diff != "" {
		t.Errorf("SetState ops (-want +got):\n%s", diff)
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
	if diff := cmp.Diff(map[string][]byte{"c": []byte("3")}, readOlder(t, dir).Checkpoints["u/1"]); diff != "" {
		t.Errorf("checkpoint after replace (-want +got):\n%s", diff)
	}
}

// TestCrashBeforeRename simulates a crash after the temporary file is
// written and synced but before it is renamed into place.
func TestCrashBeforeRename(t *testing.T) {
	s, dir, clk := newStore(t)
	old := source("u", "1")
	if err := s.SetState(State{LastKnownGood: old}); err != nil {
		t.Fatal(err)
	}
	r := record(s)
	r.crashAt = func(_ int, op string) bool { return strings.HasPrefix(op, "rename ") }
	if err := s.SetState(State{LastKnownGood: source("u", "2")}); !errors.Is(err, errCrashed) {
		t.Fatalf("SetState error = %v, want the simulated crash", err)
	}
	if diff := cmp.Diff([]string{"meta/<tmp>"}, tmpNames(t, s.Dir())); diff != "" {
		t.Errorf("temporaries after the crash (-want +got):\n%s", diff)
	}

	s, err := Open(dir, clk)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := s.State()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(old, got.LastKnownGood); diff != "" {
		t.Errorf("last-known-good after the crash (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(old, readOlder(t, dir).LastKnownGood); diff != "" {
		t.Errorf("meta/last-known-good after the crash (-want +got):\n%s", diff)
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
		// Assigned and LKG are the record's, OlderAssigned and OlderLKG
		// upstream's meta files derived from it, as a kubelet reads them.
		Assigned, LKG, OlderAssigned, OlderLKG *corev1.NodeConfigSource
		Checkpoints                            map[string]string
		Baseline                               string
	}
	u1, u2 := source("u", "1"), source("u", "2")
	files := func(v string) map[string][]byte { return map[string][]byte{"kubelet": []byte(v), "x": []byte(v)} }
	setup := func(t *testing.T, s *Store) {
		t.Helper()
		for _, err := range []error{
			s.Save("u", "1", files("one")),
			s.Save("u", "2", files("two")),
			s.Save("v", "1", files("v")),
			s.SetState(State{Assigned: u1, LastKnownGood: u1, Active: u1}),
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
	// SetState renames the record into place before the files it derives,
	// which a crash can leave behind it, each old or new.
	recordFirst := func(before, after, got state) bool {
		behind := after
		behind.OlderAssigned, behind.OlderLKG = before.OlderAssigned, before.OlderLKG
		return oldOrNew(before, after, got) || cmp.Equal(behind, got)
	}
	ops := map[string]struct {
		// prepare, if set, runs after setup, before the operation.
		prepare func(s *Store) error
		op      func(s *Store) error
		// accept reports whether got is a consistent state after a crash.
		accept func(before, after, got state) bool
	}{
		"SetState of an assignment": {
			op:     func(s *Store) error { return s.SetState(State{Assigned: u2, LastKnownGood: u1, Active: u1}) },
			accept: recordFirst,
		},
		"SetState of a local last-known-good": {
			op:     func(s *Store) error { return s.SetState(State{Assigned: u1, Active: u1}) },
			accept: recordFirst,
		},
		"Save new":     {op: func(s *Store) error { return s.Save("w", "9", files("new")) }, accept: oldOrNew},
		"SaveBaseline": {op: func(s *Store) error { _, err := s.SaveBaseline("config", []byte("local")); return err }, accept: oldOrNew},
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
		rec, _, err := s.State()
		if err != nil {
			t.Fatal(err)
		}
		st.Assigned, st.LKG = rec.Assigned, rec.LastKnownGood
		older := readOlder(t, dir)
		st.OlderAssigned, st.OlderLKG = older.Assigned, older.LastKnownGood
		st.Checkpoints = map[string]string{}
		for p, mode := range checkpointtest.Tree(t, filepath.Join(s.Dir(), "checkpoints")) {
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
	if err := s.SetState(State{Assigned: source("a", "2"), Active: source("a", "2"), LastKnownGood: source("c", "5")}); err != nil {
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
	if diff := cmp.Diff(wantTree, checkpointtest.Tree(t, cp)); diff != "" {
		t.Errorf("checkpoints after GC (-want +got):\n%s", diff)
	}

	// With the record all local, everything goes, uid directories too.
	if err := s.SetState(State{}); err != nil {
		t.Fatal(err)
	}
	if removed, err = s.GC(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{filepath.Join(cp, "a", "2"), filepath.Join(cp, "c", "5")}, removed); diff != "" {
		t.Errorf("second GC removed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]fs.FileMode{".": fs.ModeDir | 0o700}, checkpointtest.Tree(t, cp)); diff != "" {
		t.Errorf("checkpoints after second GC (-want +got):\n%s", diff)
	}
}

// The trial start is the record's, kept across restarts; SetState derives
// meta/assigned-at from it. A store without a record is adopted with the
// time its meta/assigned-at holds, or none, as a kubelet left it.
func TestAssignedAt(t *testing.T) {
	s, dir, clk := newStore(t)
	path := filepath.Join(s.Dir(), "meta", "assigned-at")
	u1 := source("u", "1")
	at, later := t0, t0.Add(time.Hour)
	check := func(step string, want *time.Time, wantAdopted bool) {
		t.Helper()
		st, adopted, err := s.State()
		if err != nil || adopted != wantAdopted {
			t.Fatalf("%s: State = adopted %v, %v; want adopted %v", step, adopted, err, wantAdopted)
		}
		if diff := cmp.Diff(want, st.AssignedAt); diff != "" {
			t.Errorf("%s: assignedAt (-want +got):\n%s", step, diff)
		}
	}

	if err := s.SetState(State{Assigned: u1, AssignedAt: &at, Active: u1}); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute)
	var err error
	if s, err = Open(dir, clk); err != nil {
		t.Fatal(err)
	}
	check("after reopen", &at, false)
	if got, err := os.ReadFile(path); err != nil || string(got) != "2026-01-02T03:04:05.123456789Z\n" {
		t.Errorf("meta/assigned-at = %q, %v; want the trial start", got, err)
	}
	// The local config has no trial: the file goes.
	if err := s.SetState(State{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("meta/assigned-at with the local config assigned: %v; want none", err)
	}

	checkpointtest.Write(t, dir, checkpointtest.Layout{Assigned: u1, AssignedAt: &later})
	check("an older dkc's store", &later, true)
	checkpointtest.Write(t, dir, checkpointtest.Layout{Assigned: u1})
	check("a kubelet's store", nil, true)
	checkpointtest.Write(t, dir, checkpointtest.Layout{AssignedAt: &later})
	check("an older dkc's store with the local config", nil, true)

	checkpointtest.Write(t, dir, checkpointtest.Layout{Assigned: u1})
	writeFile(t, path, "yesterday")
	if _, _, err := s.State(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "meta/assigned-at") {
		t.Errorf("State with a corrupt meta/assigned-at: error = %v, want one wrapping ErrCorrupt naming the file", err)
	}
	// A record replaces it.
	if err := s.SetState(State{Assigned: u1, AssignedAt: &at, Active: u1}); err != nil {
		t.Fatal(err)
	}
	if got := readOlder(t, dir).AssignedAt; got == nil || !got.Equal(at) {
		t.Errorf("meta/assigned-at over a corrupt one = %v, want %v", got, at)
	}
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

// meta/last-error is the assigned config's error: SetState derives it from
// the record, and a store without a record is adopted with it.
func TestLastError(t *testing.T) {
	s, dir, _ := newStore(t)
	u1 := source("u", "1")
	for _, msg := range []string{"", status.LoadError + ": boom", ""} {
		st := State{Assigned: u1, Active: u1}
		if msg != "" {
			st.Error, st.ErrorSource = msg, u1
		}
		if err := s.SetState(st); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(msg, readOlder(t, dir).LastError); diff != "" {
			t.Errorf("meta/last-error (-want +got):\n%s", diff)
		}
	}
	for _, msg := range []string{status.LoadError + ": boom", ""} {
		checkpointtest.Write(t, dir, checkpointtest.Layout{Assigned: u1, LastError: msg})
		st, _, err := s.State()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(msg, st.AssignedError()); diff != "" {
			t.Errorf("adopted error (-want +got):\n%s", diff)
		}
	}
}
