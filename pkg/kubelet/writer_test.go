package kubelet

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// memBaselines is a BaselineStore in memory that counts saves and
// removals. err fails every method; removeErr fails RemoveBaseline only, as
// a crash between Restore's write and the removal would.
type memBaselines struct {
	data      map[string][]byte
	saves     int
	removes   int
	err       error
	removeErr error
}

func (s *memBaselines) RemoveBaseline(name string) error {
	if s.err != nil {
		return s.err
	}
	if s.removeErr != nil {
		return s.removeErr
	}
	if _, ok := s.data[name]; ok {
		delete(s.data, name)
		s.removes++
	}
	return nil
}

func (s *memBaselines) SaveBaseline(name string, data []byte) (bool, error) {
	if s.err != nil {
		return false, s.err
	}
	if _, ok := s.data[name]; ok {
		return false, nil
	}
	if s.data == nil {
		s.data = map[string][]byte{}
	}
	s.data[name] = append([]byte(nil), data...)
	s.saves++
	return true, nil
}

func (s *memBaselines) Baseline(name string) ([]byte, bool, error) {
	if s.err != nil {
		return nil, false, s.err
	}
	d, ok := s.data[name]
	return d, ok, nil
}

func writeFile(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // umask
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dirListing lists dir's entries with their modes.
func dirListing(t *testing.T, dir string) map[string]os.FileMode {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]os.FileMode{}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = fi.Mode()
	}
	return out
}

const localConfig = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 110\n"

func TestReplaceWriter(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	writeFile(t, path, localConfig, 0o644)
	store := &memBaselines{}
	w := NewReplaceWriter(path, store)

	if got := w.Mode(); got != Replace {
		t.Errorf("Mode() = %q, want %q", got, Replace)
	}
	local, err := w.Local()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(localConfig, string(local)); diff != "" {
		t.Errorf("Local() before Apply (-want +got):\n%s", diff)
	}
	if store.saves != 0 {
		t.Errorf("Local() saved a baseline")
	}

	for _, payload := range []string{"maxPods: 42\n", "maxPods: 43\n"} {
		if err := w.Apply([]byte(payload)); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, path); got != payload {
			t.Errorf("config after Apply = %q, want %q", got, payload)
		}
		if diff := cmp.Diff(map[string]os.FileMode{"config.yaml": 0o644}, dirListing(t, dir)); diff != "" {
			t.Errorf("directory after Apply (-want +got):\n%s", diff)
		}
	}
	if store.saves != 1 {
		t.Errorf("baseline saved %d times, want 1", store.saves)
	}
	if got := string(store.data[BaselineName]); got != localConfig {
		t.Errorf("baseline = %q, want %q", got, localConfig)
	}
	local, err = w.Local()
	if err != nil {
		t.Fatal(err)
	}
	if got := string(local); got != localConfig {
		t.Errorf("Local() after Apply = %q, want %q", got, localConfig)
	}
	eff, err := w.Effective()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(eff), `{"maxPods":43}`; got != want {
		t.Errorf("Effective() = %s, want %s", got, want)
	}

	if err := w.Restore(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); got != localConfig {
		t.Errorf("config after Restore = %q, want %q", got, localConfig)
	}
	if diff := cmp.Diff(map[string]os.FileMode{"config.yaml": 0o644}, dirListing(t, dir)); diff != "" {
		t.Errorf("directory after Restore (-want +got):\n%s", diff)
	}
	if _, ok := store.data[BaselineName]; ok || store.removes != 1 {
		t.Errorf("baseline after Restore: kept %v, removed %d times; want it removed once", ok, store.removes)
	}
}

// The baseline is the local config at the moment dkc takes the file over:
// an operator's edit made while the node ran its local config survives the
// next assign and reset.
func TestReplaceWriterBaselineFollowsOperatorEdits(t *testing.T) {
	const edited = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 111\n"
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	writeFile(t, path, localConfig, 0o644)
	store := &memBaselines{}
	w := NewReplaceWriter(path, store)

	steps := []struct {
		do   func() error
		want string // the --config file after the step
	}{
		{func() error { return w.Apply([]byte("maxPods: 42\n")) }, "maxPods: 42\n"},
		{w.Restore, localConfig},
		{func() error { writeFile(t, path, edited, 0o644); return nil }, edited},
		{func() error { return w.Apply([]byte("maxPods: 43\n")) }, "maxPods: 43\n"},
		{w.Restore, edited},
	}
	for i, step := range steps {
		if err := step.do(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := readFile(t, path); got != step.want {
			t.Errorf("config after step %d = %q, want %q", i, got, step.want)
		}
	}
	if store.saves != 2 || store.removes != 2 {
		t.Errorf("baseline saved %d and removed %d times, want 2 and 2", store.saves, store.removes)
	}
}

// A crash between Restore's write and the baseline's removal leaves a
// baseline equal to the file: harmless to the next Apply and Restore.
func TestReplaceWriterCrashBeforeBaselineRemoval(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	writeFile(t, path, localConfig, 0o644)
	store := &memBaselines{}
	w := NewReplaceWriter(path, store)
	if err := w.Apply([]byte("maxPods: 42\n")); err != nil {
		t.Fatal(err)
	}

	store.removeErr = errors.New("crashed")
	err := w.Restore()
	if got, want := errString(err), "restore kubelet config: drop baseline: crashed"; got != want {
		t.Errorf("Restore error = %q, want %q", got, want)
	}
	if got := readFile(t, path); got != localConfig {
		t.Errorf("config after the crash = %q, want the local config", got)
	}
	if got := string(store.data[BaselineName]); got != localConfig {
		t.Errorf("baseline after the crash = %q, want the local config", got)
	}

	store.removeErr = nil
	if err := w.Apply([]byte("maxPods: 43\n")); err != nil {
		t.Fatal(err)
	}
	if store.saves != 1 {
		t.Errorf("baseline saved %d times, want 1: the kept one equals the file", store.saves)
	}
	if err := w.Restore(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); got != localConfig {
		t.Errorf("config after Restore = %q, want the local config", got)
	}
	if _, ok := store.data[BaselineName]; ok {
		t.Errorf("baseline kept after Restore")
	}
}

func TestReplaceWriterRestoreWithoutBaseline(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	writeFile(t, path, localConfig, 0o600)
	w := NewReplaceWriter(path, &memBaselines{})
	if err := w.Restore(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); got != localConfig {
		t.Errorf("config after Restore = %q, want it untouched", got)
	}
}

func TestReplaceWriterErrors(t *testing.T) {
	storeErr := errors.New("disk on fire")
	tests := map[string]struct {
		store   *memBaselines
		missing bool
		op      func(w *ReplaceWriter) error
		wantErr string
	}{
		"apply without a config file": {
			store:   &memBaselines{},
			missing: true,
			op:      func(w *ReplaceWriter) error { return w.Apply([]byte("x")) },
			wantErr: "capture baseline: open DIR/config.yaml: no such file or directory",
		},
		"apply with a broken store": {
			store:   &memBaselines{err: storeErr},
			op:      func(w *ReplaceWriter) error { return w.Apply([]byte("x")) },
			wantErr: "capture baseline: disk on fire",
		},
		"restore with a broken store": {
			store:   &memBaselines{err: storeErr},
			op:      func(w *ReplaceWriter) error { return w.Restore() },
			wantErr: "restore kubelet config: disk on fire",
		},
		"local with a broken store": {
			store:   &memBaselines{err: storeErr},
			op:      func(w *ReplaceWriter) error { _, err := w.Local(); return err },
			wantErr: "local kubelet config: disk on fire",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "config.yaml")
			if !tc.missing {
				writeFile(t, path, localConfig, 0o644)
			}
			err := tc.op(NewReplaceWriter(path, tc.store))
			got := ""
			if err != nil {
				got = strings.ReplaceAll(err.Error(), dir, "DIR")
			}
			if got != tc.wantErr {
				t.Errorf("error = %q, want %q", got, tc.wantErr)
			}
			if !tc.missing {
				if got := readFile(t, path); got != localConfig {
					t.Errorf("config = %q, want it untouched", got)
				}
			}
		})
	}
}

func TestReplaceWriterFollowsSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real.yaml")
	link := filepath.Join(dir, "config.yaml")
	writeFile(t, target, localConfig, 0o640)
	if err := os.Symlink("real.yaml", link); err != nil {
		t.Fatal(err)
	}
	w := NewReplaceWriter(link, &memBaselines{})
	if err := w.Apply([]byte("maxPods: 42\n")); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, target); got != "maxPods: 42\n" {
		t.Errorf("link target = %q, want the payload", got)
	}
	want := map[string]os.FileMode{"config.yaml": os.ModeSymlink | 0o777, "real.yaml": 0o640}
	if diff := cmp.Diff(want, dirListing(t, dir)); diff != "" {
		t.Errorf("directory (-want +got):\n%s", diff)
	}
}

func TestDropInWriter(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	confDir := filepath.Join(dir, "config.d")
	if err := os.Mkdir(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, localConfig, 0o644)
	w := NewDropInWriter(path, confDir)

	if got := w.Mode(); got != DropIn {
		t.Errorf("Mode() = %q, want %q", got, DropIn)
	}
	if local, err := w.Local(); local != nil || err != nil {
		t.Errorf("Local() = %q, %v; want nil, nil", local, err)
	}
	if err := w.Restore(); err != nil {
		t.Errorf("Restore() without a drop-in: %v", err)
	}

	payload := "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 42\n"
	if err := w.Apply([]byte(payload)); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(confDir, DropInName)); got != payload {
		t.Errorf("drop-in = %q, want %q", got, payload)
	}
	if diff := cmp.Diff(map[string]os.FileMode{DropInName: 0o600}, dirListing(t, confDir)); diff != "" {
		t.Errorf("config dir after first Apply (-want +got):\n%s", diff)
	}
	// An operator may loosen the mode; a rewrite keeps it.
	if err := os.Chmod(filepath.Join(confDir, DropInName), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := w.Apply([]byte(payload)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]os.FileMode{DropInName: 0o644}, dirListing(t, confDir)); diff != "" {
		t.Errorf("config dir after second Apply (-want +got):\n%s", diff)
	}
	eff, err := w.Effective()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(eff), `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":42}`; got != want {
		t.Errorf("Effective() = %s, want %s", got, want)
	}
	if got := readFile(t, path); got != localConfig {
		t.Errorf("--config = %q, want it untouched", got)
	}

	if err := w.Restore(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]os.FileMode{}, dirListing(t, confDir)); diff != "" {
		t.Errorf("config dir after Restore (-want +got):\n%s", diff)
	}
}

func TestEffective(t *testing.T) {
	const base = `kind: KubeletConfiguration
apiVersion: kubelet.config.k8s.io/v1beta1
maxPods: 110
evictionHard:
  memory.available: 100Mi
  nodefs.available: 10%
featureGates:
  A: true
`
	tests := map[string]struct {
		files map[string]string // in the config dir; a trailing "/" makes a directory
		noDir bool
		want  string
	}{
		"no config dir": {
			noDir: true,
			want:  `{"apiVersion":"kubelet.config.k8s.io/v1beta1","evictionHard":{"memory.available":"100Mi","nodefs.available":"10%"},"featureGates":{"A":true},"kind":"KubeletConfiguration","maxPods":110}`,
		},
		"empty config dir": {
			files: map[string]string{},
			want:  `{"apiVersion":"kubelet.config.k8s.io/v1beta1","evictionHard":{"memory.available":"100Mi","nodefs.available":"10%"},"featureGates":{"A":true},"kind":"KubeletConfiguration","maxPods":110}`,
		},
		"lexical order, maps merge, null deletes, only *.conf": {
			files: map[string]string{
				"90-last.conf":        `{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1","maxPods":90,"featureGates":null}`,
				"10-first.conf":       "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 10\nevictionHard:\n  memory.available: 1Gi\n",
				"50-kubectl-dkc.conf": "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 50\nserializeImagePulls: false\n",
				"95-ignored.yaml":     "maxPods: 1\n",
				"99-ignored.conf.bak": "maxPods: 2\n",
				"97-dir.conf/":        "",
			},
			want: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","evictionHard":{"memory.available":"1Gi","nodefs.available":"10%"},"kind":"KubeletConfiguration","maxPods":90,"serializeImagePulls":false}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "config.yaml")
			writeFile(t, path, base, 0o644)
			confDir := filepath.Join(dir, "config.d")
			if !tc.noDir {
				if err := os.Mkdir(confDir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			names := make([]string, 0, len(tc.files))
			for n := range tc.files {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				if strings.HasSuffix(n, "/") {
					if err := os.Mkdir(filepath.Join(confDir, n), 0o755); err != nil {
						t.Fatal(err)
					}
					continue
				}
				writeFile(t, filepath.Join(confDir, n), tc.files[n], 0o644)
			}
			got, err := NewDropInWriter(path, confDir).Effective()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("Effective() (-want +got):\n%s", diff)
			}
			// The replace writer merges the same way when it knows the dir.
			rw := NewReplaceWriter(path, &memBaselines{})
			rw.ConfigDir = confDir
			got, err = rw.Effective()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("replace Effective() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEffectiveErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	confDir := filepath.Join(dir, "config.d")
	if err := os.Mkdir(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	w := NewDropInWriter(path, confDir)
	_, err := w.Effective()
	if got, want := strings.ReplaceAll(errString(err), dir, "DIR"), "effective kubelet config: open DIR/config.yaml: no such file or directory"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	writeFile(t, path, localConfig, 0o644)
	writeFile(t, filepath.Join(confDir, "10-bad.conf"), "maxPods: [", 0o644)
	_, err = w.Effective()
	if got, want := strings.ReplaceAll(errString(err), dir, "DIR"), "effective kubelet config: parse DIR/config.d/10-bad.conf: yaml: line 1: did not find expected node content"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestPreview(t *testing.T) {
	const (
		base     = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 110\nport: 10250\n"
		operator = `{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1","port":10251}`
		late     = `{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1","maxPods":7}`
		ours     = `{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1","maxPods":42,"port":null}`
		payload  = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 50\n"
	)
	tests := map[string]struct {
		mode    ApplyMode
		noDir   bool
		dropIns map[string]string
		// baseline, when set, is the replace writer's kept local config.
		baseline string
		payload  []byte
		want     string
	}{
		"replace: payload, no config dir": {
			mode:    Replace,
			noDir:   true,
			payload: []byte(payload),
			want:    `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":50}`,
		},
		"replace: payload with the operator's drop-ins over it": {
			mode:    Replace,
			dropIns: map[string]string{"10-operator.conf": operator, "ignored.yaml": late},
			payload: []byte(payload),
			want:    `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":50,"port":10251}`,
		},
		"replace: nil is the local config, the file while no baseline is kept": {
			mode: Replace,
			want: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":110,"port":10250}`,
		},
		"replace: nil is the local config, the baseline while one is kept": {
			mode:     Replace,
			dropIns:  map[string]string{"10-operator.conf": operator},
			baseline: `{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1","maxPods":100}`,
			want:     `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":100,"port":10251}`,
		},
		"dropin: payload replaces dkc's drop-in, in lexical order": {
			mode:    DropIn,
			dropIns: map[string]string{"10-operator.conf": operator, DropInName: ours, "90-late.conf": late},
			payload: []byte(payload),
			want:    `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":7,"port":10251}`,
		},
		"dropin: payload takes dkc's place when there is no drop-in yet": {
			mode:    DropIn,
			dropIns: map[string]string{"10-operator.conf": operator, "90-late.conf": `{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1","port":null}`},
			payload: []byte(payload),
			want:    `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":50}`,
		},
		"dropin: nil drops dkc's drop-in": {
			mode:    DropIn,
			dropIns: map[string]string{"10-operator.conf": operator, DropInName: ours},
			want:    `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":110,"port":10251}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "config.yaml")
			confDir := filepath.Join(dir, "config.d")
			writeFile(t, path, base, 0o644)
			if !tc.noDir {
				if err := os.Mkdir(confDir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for n, data := range tc.dropIns {
				writeFile(t, filepath.Join(confDir, n), data, 0o644)
			}
			var w Writer
			if tc.mode == DropIn {
				w = NewDropInWriter(path, confDir)
			} else {
				store := &memBaselines{}
				if tc.baseline != "" {
					store.data = map[string][]byte{BaselineName: []byte(tc.baseline)}
				}
				rw := NewReplaceWriter(path, store)
				if !tc.noDir {
					rw.ConfigDir = confDir
				}
				w = rw
			}
			before := dirTree(t, dir)

			got, err := w.Preview(tc.payload)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("Preview() (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, dirTree(t, dir)); diff != "" {
				t.Errorf("Preview() changed files (-before +after):\n%s", diff)
			}
			// What Preview promises is what Effective gives after the write.
			if tc.payload != nil {
				err = w.Apply(tc.payload)
			} else {
				err = w.Restore()
			}
			if err != nil {
				t.Fatal(err)
			}
			eff, err := w.Effective()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(got), string(eff)); diff != "" {
				t.Errorf("Effective() after the write differs from Preview() (-preview +effective):\n%s", diff)
			}
		})
	}
}

func TestPreviewErrors(t *testing.T) {
	tests := map[string]struct {
		mode    ApplyMode
		noBase  bool
		payload string
		wantErr string
	}{
		"replace: payload not YAML": {
			mode:    Replace,
			payload: "maxPods: [",
			wantErr: "preview kubelet config: parse payload: yaml: line 1: did not find expected node content",
		},
		"dropin: payload not YAML": {
			mode:    DropIn,
			payload: "maxPods: [",
			wantErr: "preview kubelet config: parse payload: yaml: line 1: did not find expected node content",
		},
		"dropin: no --config": {
			mode:    DropIn,
			noBase:  true,
			payload: "maxPods: 1\n",
			wantErr: "preview kubelet config: open DIR/config.yaml: no such file or directory",
		},
		"replace: no --config for the local config": {
			mode:    Replace,
			noBase:  true,
			wantErr: "preview kubelet config: local kubelet config: open DIR/config.yaml: no such file or directory",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "config.yaml")
			confDir := filepath.Join(dir, "config.d")
			if err := os.Mkdir(confDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if !tc.noBase {
				writeFile(t, path, localConfig, 0o644)
			}
			var w Writer = NewDropInWriter(path, confDir)
			if tc.mode == Replace {
				w = NewReplaceWriter(path, &memBaselines{})
			}
			var payload []byte
			if tc.payload != "" {
				payload = []byte(tc.payload)
			}
			_, err := w.Preview(payload)
			if got := strings.ReplaceAll(errString(err), dir, "DIR"); got != tc.wantErr {
				t.Errorf("error = %q, want %q", got, tc.wantErr)
			}
		})
	}
}

// dirTree returns every file under root with its content.
func dirTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[strings.TrimPrefix(p, root)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
