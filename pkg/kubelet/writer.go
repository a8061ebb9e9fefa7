package kubelet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
)

// BaselineName is the name under which the replace writer keeps the node's
// original --config file in its BaselineStore.
const BaselineName = "config"

// BaselineStore keeps the node's original local config, captured once before
// dkc first overwrites it. *checkpoint.Store implements it.
type BaselineStore interface {
	// SaveBaseline saves data under name unless something is saved there
	// already, and reports whether it wrote.
	SaveBaseline(name string, data []byte) (bool, error)
	// Baseline returns what was saved under name, and false if nothing was.
	Baseline(name string) ([]byte, bool, error)
}

// ReplaceWriter writes the whole payload to the kubelet's --config file. The
// file's content before dkc's first write is kept in a BaselineStore, so that
// Restore can put it back.
type ReplaceWriter struct {
	// ConfigPath is the kubelet's --config file.
	ConfigPath string
	// ConfigDir is the kubelet's --config-dir, if it has one; Effective
	// merges its *.conf drop-ins over ConfigPath. Optional.
	ConfigDir string
	// Store keeps the baseline.
	Store BaselineStore
}

var _ Writer = &ReplaceWriter{}

// NewReplaceWriter returns a Writer that replaces the --config file at
// configPath and keeps its original content in store. Set ConfigDir on the
// result when the kubelet also runs with --config-dir.
func NewReplaceWriter(configPath string, store BaselineStore) *ReplaceWriter {
	return &ReplaceWriter{ConfigPath: configPath, Store: store}
}

// Mode is Replace.
func (w *ReplaceWriter) Mode() ApplyMode { return Replace }

// Local returns the baseline, or the current --config file while dkc has not
// written it yet.
func (w *ReplaceWriter) Local() ([]byte, error) {
	data, ok, err := w.Store.Baseline(BaselineName)
	if err != nil {
		return nil, fmt.Errorf("local kubelet config: %w", err)
	}
	if ok {
		return data, nil
	}
	data, err = os.ReadFile(w.ConfigPath)
	if err != nil {
		return nil, fmt.Errorf("local kubelet config: %w", err)
	}
	return data, nil
}

// Apply captures the baseline if it is not captured yet, then replaces the
// --config file with payload, keeping the file's mode and owner.
func (w *ReplaceWriter) Apply(payload []byte) error {
	if err := w.captureBaseline(); err != nil {
		return err
	}
	if err := writeFileAtomic(w.ConfigPath, payload, 0o600); err != nil {
		return fmt.Errorf("write kubelet config: %w", err)
	}
	return nil
}

func (w *ReplaceWriter) captureBaseline() error {
	if _, ok, err := w.Store.Baseline(BaselineName); err != nil {
		return fmt.Errorf("capture baseline: %w", err)
	} else if ok {
		return nil
	}
	data, err := os.ReadFile(w.ConfigPath)
	if err != nil {
		return fmt.Errorf("capture baseline: %w", err)
	}
	if _, err := w.Store.SaveBaseline(BaselineName, data); err != nil {
		return fmt.Errorf("capture baseline: %w", err)
	}
	return nil
}

// Restore writes the baseline back to the --config file. Without a baseline
// dkc never wrote the file, so there is nothing to restore.
func (w *ReplaceWriter) Restore() error {
	data, ok, err := w.Store.Baseline(BaselineName)
	if err != nil {
		return fmt.Errorf("restore kubelet config: %w", err)
	}
	if !ok {
		return nil
	}
	if err := writeFileAtomic(w.ConfigPath, data, 0o600); err != nil {
		return fmt.Errorf("restore kubelet config: %w", err)
	}
	return nil
}

// Effective returns the --config file as JSON, with the *.conf drop-ins of
// ConfigDir merged over it when ConfigDir is set.
func (w *ReplaceWriter) Effective() ([]byte, error) {
	return effective(w.ConfigPath, w.ConfigDir)
}

// DropInWriter writes the payload as DropInName in the kubelet's
// --config-dir, where the kubelet merges it over --config.
type DropInWriter struct {
	// ConfigPath is the kubelet's --config file; dkc never writes it.
	ConfigPath string
	// ConfigDir is the kubelet's --config-dir.
	ConfigDir string
}

var _ Writer = &DropInWriter{}

// NewDropInWriter returns a Writer that owns DropInName in configDir, the
// kubelet's --config-dir, next to its --config file configPath.
func NewDropInWriter(configPath, configDir string) *DropInWriter {
	return &DropInWriter{ConfigPath: configPath, ConfigDir: configDir}
}

// Mode is DropIn.
func (w *DropInWriter) Mode() ApplyMode { return DropIn }

// Local returns nil: the local config is --config with the other drop-ins,
// which dkc never touches.
func (w *DropInWriter) Local() ([]byte, error) { return nil, nil }

// Path is the drop-in file dkc owns.
func (w *DropInWriter) Path() string { return filepath.Join(w.ConfigDir, DropInName) }

// Apply writes payload as the drop-in. The payload must carry kind and
// apiVersion, as the kubelet requires of drop-ins since 1.35; the caller
// checks that (kubeletconfig.DecodePartial).
func (w *DropInWriter) Apply(payload []byte) error {
	if err := writeFileAtomic(w.Path(), payload, 0o600); err != nil {
		return fmt.Errorf("write kubelet drop-in: %w", err)
	}
	return nil
}

// Restore removes the drop-in; a missing one is already restored.
func (w *DropInWriter) Restore() error {
	err := os.Remove(w.Path())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove kubelet drop-in: %w", err)
	}
	if err := syncDir(w.ConfigDir); err != nil {
		return fmt.Errorf("remove kubelet drop-in: %w", err)
	}
	return nil
}

// Effective returns --config with every *.conf file of the config dir merged
// over it in lexical order, as JSON.
func (w *DropInWriter) Effective() ([]byte, error) {
	return effective(w.ConfigPath, w.ConfigDir)
}

// effective merges the *.conf files of configDir (if not empty) over the
// config file at configPath, as the kubelet does: in lexical order of their
// names, each as an RFC 7386 JSON merge patch. Only regular files (or links
// to them) whose names end in ".conf" count.
func effective(configPath, configDir string) ([]byte, error) {
	base, err := readJSON(configPath)
	if err != nil {
		return nil, fmt.Errorf("effective kubelet config: %w", err)
	}
	if configDir == "" {
		return base, nil
	}
	entries, err := os.ReadDir(configDir) // sorted by name
	if errors.Is(err, fs.ErrNotExist) {
		return base, nil
	}
	if err != nil {
		return nil, fmt.Errorf("effective kubelet config: %w", err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".conf") {
			continue
		}
		path := filepath.Join(configDir, e.Name())
		if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		patch, err := readJSON(path)
		if err != nil {
			return nil, fmt.Errorf("effective kubelet config: %w", err)
		}
		if base, err = kubeletconfig.MergePatch(base, patch); err != nil {
			return nil, fmt.Errorf("effective kubelet config: drop-in %s: %w", path, err)
		}
	}
	return base, nil
}

// readJSON reads a YAML or JSON file and returns it as JSON.
func readJSON(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	return j, nil
}

// writeFileAtomic replaces the file at path with data: it writes a temporary
// file in the same directory, fsyncs it, renames it over path and fsyncs the
// directory. The new file keeps the old one's mode and owner; a new file gets
// mode perm. A symlink at path is followed, so its target is replaced.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) error {
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target
	}
	uid, gid := -1, -1
	fi, err := os.Stat(path)
	switch {
	case err == nil:
		perm = fi.Mode().Perm()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(st.Uid), int(st.Gid)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	dir := filepath.Dir(path)
	// The temporary name never ends in ".conf", so a kubelet starting
	// meanwhile does not read it as a drop-in.
	f, err := os.CreateTemp(dir, ".dkc-tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	done := false
	defer func() {
		if !done {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if uid >= 0 && (uid != os.Geteuid() || gid != os.Getegid()) {
		if err := f.Chown(uid, gid); err != nil {
			return err
		}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	done = true
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
