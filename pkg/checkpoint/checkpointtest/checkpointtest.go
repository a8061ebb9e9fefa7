// Package checkpointtest writes and reads checkpoint stores as other writers
// left them: an upstream kubelet 1.23's dynamic-config store, with the meta
// files an older dkc added to it. It works on the files alone, never
// through checkpoint.Store, so that a test sets up a store that someone
// else wrote (a kubelet, an older dkc, a crash mid-write) and checks the
// files a kubelet would read, whatever the store's own code does. The
// tests of pkg/checkpoint, pkg/agent and test/e2e share it.
package checkpointtest

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/pkg/apis/dkc/v1alpha1"
)

// Names under <dir>/store: upstream's, then dkc's.
const (
	storeDir          = "store"
	metaDir           = "meta"
	checkpointsDir    = "checkpoints"
	assignedFile      = "assigned"
	lastKnownGoodFile = "last-known-good"

	stateFile      = "state"
	assignedAtFile = "assigned-at"
	lastErrorFile  = "last-error"
)

// serializedKind is the kind of the objects in upstream's meta files.
const serializedKind = "SerializedNodeConfigSource"

// Layout is a store without dkc's record (meta/state): the files a 1.23
// kubelet wrote, and the two meta files an older dkc added to them.
type Layout struct {
	// Assigned and LastKnownGood are meta/assigned and
	// meta/last-known-good; nil is the node's local config, an empty file.
	Assigned, LastKnownGood *corev1.NodeConfigSource
	// AssignedAt is dkc's meta/assigned-at, the start of the assigned
	// config's trial; nil is no file, as a kubelet left it.
	AssignedAt *time.Time
	// LastError is dkc's meta/last-error, the assigned config's error;
	// "" is no file.
	LastError string
	// Checkpoints are the files under checkpoints/, by
	// "<uid>/<resourceVersion>" and then by ConfigMap key.
	Checkpoints map[string]map[string][]byte
}

// Write makes the store under dir/store hold l, as a 1.23 kubelet and an
// older dkc wrote it: meta/assigned and meta/last-known-good in upstream's
// format, dkc's meta/assigned-at and meta/last-error where l sets them, and
// l's checkpoints. It removes meta/state and the dkc meta files l leaves
// unset, so that the store reads as l; other checkpoints and baseline/ stay.
func Write(t testing.TB, dir string, l Layout) {
	t.Helper()
	root := filepath.Join(dir, storeDir)
	// As the kubelet's Initialize made them.
	if err := mkdirs(dir, storeDir); err != nil {
		t.Fatalf("checkpointtest: %v", err)
	}
	if err := mkdirs(root, checkpointsDir); err != nil {
		t.Fatalf("checkpointtest: %v", err)
	}
	files := map[string][]byte{}
	for name, src := range map[string]*corev1.NodeConfigSource{assignedFile: l.Assigned, lastKnownGoodFile: l.LastKnownGood} {
		data, err := encode(src)
		if err != nil {
			t.Fatalf("checkpointtest: meta/%s: %v", name, err)
		}
		files[path.Join(metaDir, name)] = data
	}
	if l.AssignedAt != nil {
		files[path.Join(metaDir, assignedAtFile)] = []byte(l.AssignedAt.UTC().Format(time.RFC3339Nano) + "\n")
	}
	if l.LastError != "" {
		files[path.Join(metaDir, lastErrorFile)] = []byte(l.LastError)
	}
	for _, name := range []string{stateFile, assignedAtFile, lastErrorFile} {
		if err := os.Remove(filepath.Join(root, metaDir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("checkpointtest: %v", err)
		}
	}
	for id, keys := range l.Checkpoints {
		if strings.Count(id, "/") != 1 {
			t.Fatalf("checkpointtest: checkpoint %q: want <uid>/<resourceVersion>", id)
		}
		if err := mkdirs(root, path.Join(checkpointsDir, id)); err != nil {
			t.Fatalf("checkpointtest: %v", err)
		}
		for key, data := range keys {
			files[path.Join(checkpointsDir, id, key)] = data
		}
	}
	for rel, data := range files {
		if err := writeFile(root, rel, data); err != nil {
			t.Fatalf("checkpointtest: %v", err)
		}
	}
}

//go:embed testdata/upstream-1.23/store
var upstream123 embed.FS

// Upstream123 copies testdata/upstream-1.23/store, a store byte for byte as
// a 1.23 kubelet wrote it, to dir/store, which must not exist, and returns
// what it holds: ConfigMap kube-system/node-config-b assigned, after
// kube-system/node-config-a became last-known-good.
func Upstream123(t testing.TB, dir string) Layout {
	t.Helper()
	root := filepath.Join(dir, storeDir)
	if _, err := os.Lstat(root); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("checkpointtest: %s exists (%v); want a new directory", root, err)
	}
	tree, err := fs.Sub(upstream123, "testdata/upstream-1.23/store")
	if err != nil {
		t.Fatal(err)
	}
	if err := mkdirs(dir, storeDir); err != nil {
		t.Fatalf("checkpointtest: %v", err)
	}
	err = fs.WalkDir(tree, ".", func(rel string, d fs.DirEntry, err error) error {
		switch {
		case err != nil || rel == ".":
			return err
		case d.IsDir():
			return mkdirs(root, rel)
		}
		data, err := fs.ReadFile(tree, rel)
		if err != nil {
			return err
		}
		return writeFile(root, rel, data)
	})
	if err != nil {
		t.Fatalf("checkpointtest: %v", err)
	}
	a := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: "kube-system", Name: "node-config-a", UID: "9d2e7b41-0c5a-4e36-b8f2-71a4c6e3d905", ResourceVersion: "47790", KubeletConfigKey: "kubelet",
	}}
	b := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: "kube-system", Name: "node-config-b", UID: "3f1c9a0e-6b2d-4f8a-9c71-5e0d2b8a4c17", ResourceVersion: "48213", KubeletConfigKey: "kubelet",
	}}
	return Layout{
		Assigned:      b,
		LastKnownGood: a,
		Checkpoints: map[string]map[string][]byte{
			"9d2e7b41-0c5a-4e36-b8f2-71a4c6e3d905/47790": {"kubelet": []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 110\n")},
			"3f1c9a0e-6b2d-4f8a-9c71-5e0d2b8a4c17/48213": {"kubelet": []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 120\n")},
		},
	}
}

// Read reads the store under dir/store as a 1.23 kubelet reads it, plus
// dkc's older meta files; it ignores meta/state and baseline/. Every
// directory two levels under checkpoints/ is a checkpoint, a temporary's
// too.
func Read(dir string) (Layout, error) {
	root := filepath.Join(dir, storeDir)
	var l Layout
	for name, dst := range map[string]**corev1.NodeConfigSource{assignedFile: &l.Assigned, lastKnownGoodFile: &l.LastKnownGood} {
		p := filepath.Join(root, metaDir, name)
		data, err := os.ReadFile(p)
		if err != nil {
			return Layout{}, err
		}
		if *dst, err = decode(data); err != nil {
			return Layout{}, fmt.Errorf("meta file %q: %w", p, err)
		}
	}
	p := filepath.Join(root, metaDir, assignedAtFile)
	switch data, err := os.ReadFile(p); {
	case err == nil:
		at, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(data)))
		if err != nil {
			return Layout{}, fmt.Errorf("meta file %q: %w", p, err)
		}
		l.AssignedAt = &at
	case !errors.Is(err, fs.ErrNotExist):
		return Layout{}, err
	}
	switch data, err := os.ReadFile(filepath.Join(root, metaDir, lastErrorFile)); {
	case err == nil:
		l.LastError = string(data)
	case !errors.Is(err, fs.ErrNotExist):
		return Layout{}, err
	}
	var err error
	l.Checkpoints, err = readCheckpoints(filepath.Join(root, checkpointsDir))
	return l, err
}

func readCheckpoints(dir string) (map[string]map[string][]byte, error) {
	out := map[string]map[string][]byte{}
	uids, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, uid := range uids {
		rvs, err := os.ReadDir(filepath.Join(dir, uid.Name()))
		if err != nil {
			return nil, err
		}
		for _, rv := range rvs {
			cp := filepath.Join(dir, uid.Name(), rv.Name())
			keys, err := os.ReadDir(cp)
			if err != nil {
				return nil, err
			}
			files := map[string][]byte{}
			for _, key := range keys {
				if !key.Type().IsRegular() {
					return nil, fmt.Errorf("checkpoint %q: key %q is not a regular file", cp, key.Name())
				}
				if files[key.Name()], err = os.ReadFile(filepath.Join(cp, key.Name())); err != nil {
					return nil, err
				}
			}
			out[uid.Name()+"/"+rv.Name()] = files
		}
	}
	return out, nil
}

// encode is a meta file's content as a 1.23 kubelet wrote it: empty for the
// local config, else the YAML of a SerializedNodeConfigSource, which its
// encoder made from the object's JSON (sorted keys, numeric strings
// quoted).
func encode(src *corev1.NodeConfigSource) ([]byte, error) {
	if src == nil {
		return []byte{}, nil
	}
	obj := kubeletv1beta1.SerializedNodeConfigSource{
		TypeMeta: metav1.TypeMeta{Kind: serializedKind, APIVersion: kubeletv1beta1.SchemeGroupVersion.String()},
		Source:   *src,
	}
	return yaml.Marshal(&obj)
}

// decode reads a meta file as a 1.23 kubelet did: empty is the local
// config; otherwise a kubelet.config.k8s.io/v1beta1
// SerializedNodeConfigSource (YAML or JSON, unknown fields ignored) whose
// source has its one subfield, configMap.
func decode(data []byte) (*corev1.NodeConfigSource, error) {
	if len(data) == 0 {
		return nil, nil
	}
	var obj kubeletv1beta1.SerializedNodeConfigSource
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return nil, err
	}
	if gv := kubeletv1beta1.SchemeGroupVersion.String(); obj.Kind != serializedKind || obj.APIVersion != gv {
		return nil, fmt.Errorf("kind %q apiVersion %q, want %s %s", obj.Kind, obj.APIVersion, serializedKind, gv)
	}
	if obj.Source.ConfigMap == nil {
		return nil, errors.New(v1alpha1.AllNilSubfieldsError)
	}
	return &obj.Source, nil
}

// Tree returns the mode of every file and directory under root, root
// itself as ".", by path relative to root.
func Tree(t testing.TB, root string) map[string]fs.FileMode {
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

// mode is the mode a 1.23 kubelet under umask 022 gave rel: a checkpoint
// directory is a renamed temporary directory (0700), the others come from
// MkdirAll (0755); a meta file is a renamed temporary file (0600), a
// checkpoint's file was created in place (0644).
func mode(rel string, dir bool) fs.FileMode {
	parts := strings.Split(rel, "/")
	switch {
	case dir && len(parts) == 3 && parts[0] == checkpointsDir:
		return 0o700
	case dir:
		return 0o755
	case parts[0] == metaDir:
		return 0o600
	}
	return 0o644
}

// mkdirs creates the directory rel under root and those between, each
// with its mode, leaving those that exist.
func mkdirs(root, rel string) error {
	parts := strings.Split(rel, "/")
	for i := range parts {
		sub := path.Join(parts[:i+1]...)
		p := filepath.Join(root, filepath.FromSlash(sub))
		err := os.Mkdir(p, mode(sub, true))
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		// Whatever the test's umask.
		if err := os.Chmod(p, mode(sub, true)); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes data as the file rel under root, with its mode.
func writeFile(root, rel string, data []byte) error {
	if err := mkdirs(root, path.Dir(rel)); err != nil {
		return err
	}
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.WriteFile(p, data, mode(rel, false)); err != nil {
		return err
	}
	// Whatever the test's umask, or the mode of a file that exists.
	return os.Chmod(p, mode(rel, false))
}
