package kubelet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/pkg/atomicfile"
	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
)

// BaselineName is the name under which the replace writer keeps the node's
// local --config file in its BaselineStore.
const BaselineName = "config"

// BaselineStore keeps the node's local config while dkc's config is in the
// --config file. *checkpoint.Store implements it.
type BaselineStore interface {
	// SaveBaseline saves data under name unless something is saved there
	// already, and reports whether it wrote.
	SaveBaseline(name string, data []byte) (bool, error)
	// Baseline returns what was saved under name, and false if nothing was.
	Baseline(name string) ([]byte, bool, error)
	// RemoveBaseline removes what was saved under name, durably; removing
	// nothing is not an error.
	RemoveBaseline(name string) error
}

// ReplaceWriter writes the whole payload to the kubelet's --config file. It
// keeps the file's local content in a BaselineStore for as long as dkc's
// config may be in the file, so that Restore can put it back; see the
// package documentation for when the baseline is taken and dropped.
type ReplaceWriter struct {
	// ConfigPath is the kubelet's --config file.
	ConfigPath string
	// ConfigDir is the kubelet's --config-dir, if it has one; Effective
	// and Preview merge its *.conf drop-ins over ConfigPath. Optional.
	ConfigDir string
	// Store keeps the baseline.
	Store BaselineStore
	// FS takes every write; nil is atomicfile.OS. Tests inject crashes
	// through it.
	FS atomicfile.FS
}

var _ Writer = &ReplaceWriter{}

// NewReplaceWriter returns a Writer that replaces the --config file at
// configPath and keeps its local content in store. Set ConfigDir on the
// result when the kubelet also runs with --config-dir.
func NewReplaceWriter(configPath string, store BaselineStore) *ReplaceWriter {
	return &ReplaceWriter{ConfigPath: configPath, Store: store}
}

// Mode is Replace.
func (w *ReplaceWriter) Mode() ApplyMode { return Replace }

// Local returns the baseline, or the current --config file while dkc has
// nothing in it.
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

// Apply captures the --config file as the baseline unless a baseline is
// kept already (dkc's config is in the file then), and replaces the file
// with payload, keeping its mode and owner.
func (w *ReplaceWriter) Apply(payload []byte) error {
	if err := w.captureBaseline(); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(w.FS, w.ConfigPath, payload, 0o600); err != nil {
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

// Restore writes the baseline back to the --config file and then removes
// it, so that the next Apply captures the file as it is then, with any edit
// the operator made while the node ran its local config. Without a baseline
// dkc has nothing in the file, and Restore leaves it alone.
func (w *ReplaceWriter) Restore() error {
	data, ok, err := w.Store.Baseline(BaselineName)
	if err != nil {
		return fmt.Errorf("restore kubelet config: %w", err)
	}
	if !ok {
		return nil
	}
	if err := atomicfile.WriteFile(w.FS, w.ConfigPath, data, 0o600); err != nil {
		return fmt.Errorf("restore kubelet config: %w", err)
	}
	// Only now: a crash before this line leaves a baseline equal to the
	// file, which the next Restore writes again and the next Apply keeps.
	if err := w.Store.RemoveBaseline(BaselineName); err != nil {
		return fmt.Errorf("restore kubelet config: drop baseline: %w", err)
	}
	return nil
}

// Effective returns the --config file as JSON, with the *.conf drop-ins of
// ConfigDir merged over it when ConfigDir is set.
func (w *ReplaceWriter) Effective() ([]byte, error) {
	return effective(w.ConfigPath, w.ConfigDir)
}

// Preview returns payload (nil: the local config) as JSON, with the *.conf
// drop-ins of ConfigDir merged over it when ConfigDir is set.
func (w *ReplaceWriter) Preview(payload []byte) ([]byte, error) {
	if payload == nil {
		local, err := w.Local()
		if err != nil {
			return nil, fmt.Errorf("preview kubelet config: %w", err)
		}
		payload = local
	}
	dropIns, err := readDropIns(w.ConfigDir)
	if err != nil {
		return nil, fmt.Errorf("preview kubelet config: %w", err)
	}
	merged, err := merge(payload, "payload", dropIns)
	if err != nil {
		return nil, fmt.Errorf("preview kubelet config: %w", err)
	}
	return merged, nil
}

// DropInWriter writes the payload as DropInName in the kubelet's
// --config-dir, where the kubelet merges it over --config.
type DropInWriter struct {
	// ConfigPath is the kubelet's --config file; dkc never writes it.
	ConfigPath string
	// ConfigDir is the kubelet's --config-dir.
	ConfigDir string
	// FS takes every write; nil is atomicfile.OS. Tests inject crashes
	// through it.
	FS atomicfile.FS
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
	if err := atomicfile.WriteFile(w.FS, w.Path(), payload, 0o600); err != nil {
		return fmt.Errorf("write kubelet drop-in: %w", err)
	}
	return nil
}

// Restore removes the drop-in; a missing one is already restored.
func (w *DropInWriter) Restore() error {
	if err := atomicfile.Remove(w.FS, w.Path()); err != nil {
		return fmt.Errorf("remove kubelet drop-in: %w", err)
	}
	return nil
}

// Effective returns --config with every *.conf file of the config dir merged
// over it in lexical order, as JSON.
func (w *DropInWriter) Effective() ([]byte, error) {
	return effective(w.ConfigPath, w.ConfigDir)
}

// Preview returns --config with the *.conf files of the config dir merged
// over it in lexical order, as JSON, payload taking the place of DropInName
// (nil: without it).
func (w *DropInWriter) Preview(payload []byte) ([]byte, error) {
	base, err := os.ReadFile(w.ConfigPath)
	if err != nil {
		return nil, fmt.Errorf("preview kubelet config: %w", err)
	}
	dropIns, err := readDropIns(w.ConfigDir)
	if err != nil {
		return nil, fmt.Errorf("preview kubelet config: %w", err)
	}
	dropIns = slices.DeleteFunc(dropIns, func(d dropIn) bool { return d.name == DropInName })
	if payload != nil {
		dropIns = append(dropIns, dropIn{name: DropInName, label: "payload", data: payload})
		slices.SortFunc(dropIns, func(a, b dropIn) int { return strings.Compare(a.name, b.name) })
	}
	merged, err := merge(base, w.ConfigPath, dropIns)
	if err != nil {
		return nil, fmt.Errorf("preview kubelet config: %w", err)
	}
	return merged, nil
}

// effective merges the *.conf files of configDir (if not empty) over the
// config file at configPath, as the kubelet does.
func effective(configPath, configDir string) ([]byte, error) {
	base, err := os.ReadFile(configPath)
	if err != nil {
		return nil, fmt.Errorf("effective kubelet config: %w", err)
	}
	dropIns, err := readDropIns(configDir)
	if err != nil {
		return nil, fmt.Errorf("effective kubelet config: %w", err)
	}
	merged, err := merge(base, configPath, dropIns)
	if err != nil {
		return nil, fmt.Errorf("effective kubelet config: %w", err)
	}
	return merged, nil
}

// dropIn is one *.conf file of a config dir, or the payload in its place.
type dropIn struct {
	// name orders the drop-ins.
	name string
	// label names the drop-in in errors: its path, or "payload".
	label string
	data  []byte
}

// readDropIns reads the drop-ins of configDir in lexical order of their
// names, as the kubelet reads them: only regular files (or links to them)
// whose names end in ".conf". An empty or missing configDir has none.
func readDropIns(configDir string) ([]dropIn, error) {
	if configDir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(configDir) // sorted by name
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []dropIn
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".conf") {
			continue
		}
		path := filepath.Join(configDir, e.Name())
		if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		out = append(out, dropIn{name: e.Name(), label: path, data: data})
	}
	return out, nil
}

// merge applies dropIns, in order, each as an RFC 7386 JSON merge patch over
// base (YAML or JSON, named baseLabel in errors), and returns the result as
// JSON.
func merge(base []byte, baseLabel string, dropIns []dropIn) ([]byte, error) {
	merged, err := toJSON(base, baseLabel)
	if err != nil {
		return nil, err
	}
	for _, d := range dropIns {
		patch, err := toJSON(d.data, d.label)
		if err != nil {
			return nil, err
		}
		if merged, err = kubeletconfig.MergePatch(merged, patch); err != nil {
			return nil, fmt.Errorf("drop-in %s: %w", d.label, err)
		}
	}
	return merged, nil
}

// toJSON converts YAML or JSON data, named label in errors, to JSON.
func toJSON(data []byte, label string) ([]byte, error) {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", label, err)
	}
	return j, nil
}

// TempCleaner is implemented by the writers that can remove the
// temporaries a crash left next to the files they write. The agent calls it
// at startup.
type TempCleaner interface {
	CleanTemps() error
}

var (
	_ TempCleaner = &ReplaceWriter{}
	_ TempCleaner = &DropInWriter{}
)

// CleanTemps removes the temporaries a crash left in the --config file's
// directory.
func (w *ReplaceWriter) CleanTemps() error {
	path := w.ConfigPath
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target
	}
	if err := atomicfile.CleanTemps(w.FS, filepath.Dir(path)); err != nil {
		return fmt.Errorf("clean temporaries of kubelet config: %w", err)
	}
	return nil
}

// CleanTemps removes the temporaries a crash left in the config dir.
func (w *DropInWriter) CleanTemps() error {
	if err := atomicfile.CleanTemps(w.FS, w.ConfigDir); err != nil {
		return fmt.Errorf("clean temporaries of kubelet drop-in: %w", err)
	}
	return nil
}
