package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/kubectl-dkc/dkc/pkg/atomicfile"
)

// Names of the files and directories under <dir>/store.
const (
	storeDirName       = "store"
	metaDirName        = "meta"
	checkpointsDirName = "checkpoints"
	baselineDirName    = "baseline"

	assignedFile      = "assigned"
	lastKnownGoodFile = "last-known-good"
	assignedAtFile    = "assigned-at"
	lastErrorFile     = "last-error"
)

// Store is the checkpoint store under <dir>/store. See the package
// documentation for its layout.
type Store struct {
	mu    sync.Mutex
	root  string
	clock clock.PassiveClock
	fsys  atomicfile.FS

	// record and sources memoize the decodes of meta/state and of the
	// legacy meta files (by name), keyed by their bytes.
	record  decoded[State]
	sources map[string]*decoded[*corev1.NodeConfigSource]
}

// Open opens the store under dir/store, creating its directories and empty
// meta files as needed, and removes the temporaries that a crash left
// behind.
func Open(dir string, clk clock.PassiveClock) (*Store, error) {
	return OpenFS(dir, clk, atomicfile.OS)
}

// OpenFS is Open with every write going through fsys, so that tests can
// inject crashes (atomicfiletest.FaultFS).
func OpenFS(dir string, clk clock.PassiveClock, fsys atomicfile.FS) (*Store, error) {
	if dir == "" {
		return nil, errors.New("checkpoint store: directory must not be empty")
	}
	if clk == nil {
		return nil, errors.New("checkpoint store: clock must not be nil")
	}
	s := &Store{root: filepath.Join(dir, storeDirName), clock: clk, fsys: fsys}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint store %q: %w", s.root, err)
	}
	for _, d := range []string{s.root, s.metaDir(), s.checkpointsDir(), s.baselineDir()} {
		if err := s.mkdir(d); err != nil {
			return nil, fmt.Errorf("checkpoint store %q: %w", s.root, err)
		}
	}
	if err := s.cleanTemps(); err != nil {
		return nil, fmt.Errorf("checkpoint store %q: clean temporary files: %w", s.root, err)
	}
	// Like upstream, start with empty meta files: the local config.
	for _, name := range []string{assignedFile, lastKnownGoodFile} {
		path := filepath.Join(s.metaDir(), name)
		if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := s.writeAtomic(path, nil); err != nil {
			return nil, fmt.Errorf("meta file %q: %w", path, err)
		}
	}
	return s, nil
}

// Dir returns the store's root, <dir>/store.
func (s *Store) Dir() string { return s.root }

func (s *Store) metaDir() string        { return filepath.Join(s.root, metaDirName) }
func (s *Store) checkpointsDir() string { return filepath.Join(s.root, checkpointsDirName) }
func (s *Store) baselineDir() string    { return filepath.Join(s.root, baselineDirName) }

func (s *Store) checkpointDir(uid types.UID, resourceVersion string) string {
	return filepath.Join(s.checkpointsDir(), string(uid), resourceVersion)
}

// SaveConfigMap checkpoints the data and binaryData of cm under its uid and
// resourceVersion. See Save.
func (s *Store) SaveConfigMap(cm *corev1.ConfigMap) error {
	if cm == nil {
		return errors.New("checkpoint: configMap must not be nil")
	}
	files := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		files[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		if _, ok := files[k]; ok {
			return fmt.Errorf("checkpoint %q: configMap %s/%s: key %q is in both data and binaryData", checkpointID(cm.UID, cm.ResourceVersion), cm.Namespace, cm.Name, k)
		}
		files[k] = v
	}
	return s.Save(cm.UID, cm.ResourceVersion, files)
}

// Save writes files, one per ConfigMap key, as the checkpoint
// checkpoints/<uid>/<resourceVersion>. Every key must be a base name
// (ErrInvalidKey); nothing is written otherwise. Saving a checkpoint that
// already holds the same files does nothing. A checkpoint that holds other
// files is replaced; a crash in the middle of that leaves no checkpoint at
// all, never a partial one.
func (s *Store) Save(uid types.UID, resourceVersion string, files map[string][]byte) error {
	id := checkpointID(uid, resourceVersion)
	if err := validateDirName(string(uid)); err != nil {
		return fmt.Errorf("checkpoint %q: uid: %w", id, err)
	}
	if err := validateDirName(resourceVersion); err != nil {
		return fmt.Errorf("checkpoint %q: resourceVersion: %w", id, err)
	}
	keys := slices.Sorted(maps.Keys(files))
	for _, k := range keys {
		if err := validateName(k); err != nil {
			return fmt.Errorf("checkpoint %q: %w", id, err)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()

	final := s.checkpointDir(uid, resourceVersion)
	old, err := loadDir(final)
	if err == nil && maps.EqualFunc(old, files, bytes.Equal) {
		return nil
	}
	// A checkpoint that differs, or cannot be read, is replaced.
	exists := !errors.Is(err, ErrNotFound)

	uidDir := filepath.Dir(final)
	if !exists {
		if err := s.mkdir(uidDir); err != nil {
			return fmt.Errorf("checkpoint %q: %w", id, err)
		}
	}
	tmp := filepath.Join(uidDir, tmpName())
	if err := s.fsys.Mkdir(tmp, 0o700); err != nil {
		return fmt.Errorf("checkpoint %q: %w", id, err)
	}
	for _, k := range keys {
		if err := s.writeNew(filepath.Join(tmp, k), files[k]); err != nil {
			s.fsys.RemoveAll(tmp)
			return fmt.Errorf("checkpoint %q: write key %q: %w", id, k, err)
		}
	}
	if err := s.fsys.SyncDir(tmp); err != nil {
		s.fsys.RemoveAll(tmp)
		return fmt.Errorf("checkpoint %q: %w", id, err)
	}
	var trash string
	if exists {
		trash = filepath.Join(uidDir, tmpName())
		if err := s.fsys.Rename(final, trash); err != nil {
			s.fsys.RemoveAll(tmp)
			return fmt.Errorf("checkpoint %q: move old checkpoint aside: %w", id, err)
		}
	}
	if err := s.fsys.Rename(tmp, final); err != nil {
		s.fsys.RemoveAll(tmp)
		if trash != "" {
			s.fsys.Rename(trash, final)
		}
		return fmt.Errorf("checkpoint %q: %w", id, err)
	}
	if err := s.fsys.SyncDir(uidDir); err != nil {
		return fmt.Errorf("checkpoint %q: %w", id, err)
	}
	if trash != "" {
		if err := s.fsys.RemoveAll(trash); err != nil {
			return fmt.Errorf("checkpoint %q: remove old checkpoint: %w", id, err)
		}
	}
	return nil
}

// Load returns the files of the checkpoint that src names, by key. The error
// wraps ErrNotFound if there is no such checkpoint.
func (s *Store) Load(src *corev1.NodeConfigSource) (map[string][]byte, error) {
	ref, err := checkpointRef(src)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	files, err := loadDir(s.checkpointDir(ref.UID, ref.ResourceVersion))
	if err != nil {
		return nil, fmt.Errorf("checkpoint %q: %w", checkpointID(ref.UID, ref.ResourceVersion), err)
	}
	return files, nil
}

// LoadKey returns the file of src's kubeletConfigKey in the checkpoint that
// src names. The error wraps ErrNotFound if there is no such checkpoint or
// no such key in it.
func (s *Store) LoadKey(src *corev1.NodeConfigSource) ([]byte, error) {
	ref, err := checkpointRef(src)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	id := checkpointID(ref.UID, ref.ResourceVersion)
	if err := validateName(ref.KubeletConfigKey); err != nil {
		return nil, fmt.Errorf("checkpoint %q: kubeletConfigKey: %w", id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	dir := s.checkpointDir(ref.UID, ref.ResourceVersion)
	data, err := os.ReadFile(filepath.Join(dir, ref.KubeletConfigKey))
	if errors.Is(err, fs.ErrNotExist) {
		if _, statErr := os.Stat(dir); errors.Is(statErr, fs.ErrNotExist) {
			return nil, fmt.Errorf("checkpoint %q: %w", id, ErrNotFound)
		}
		return nil, fmt.Errorf("checkpoint %q: key %q: %w", id, ref.KubeletConfigKey, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %q: key %q: %w", id, ref.KubeletConfigKey, err)
	}
	return data, nil
}

// Exists reports whether the checkpoint that src names is in the store.
func (s *Store) Exists(src *corev1.NodeConfigSource) (bool, error) {
	ref, err := checkpointRef(src)
	if err != nil {
		return false, fmt.Errorf("checkpoint: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fi, err := os.Stat(s.checkpointDir(ref.UID, ref.ResourceVersion))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("checkpoint %q: %w", checkpointID(ref.UID, ref.ResourceVersion), err)
	case !fi.IsDir():
		return false, fmt.Errorf("checkpoint %q: %w: not a directory", checkpointID(ref.UID, ref.ResourceVersion), ErrCorrupt)
	}
	return true, nil
}

// Assigned returns the assigned config source; nil means the node's local
// config. A meta file that cannot be decoded gives an error wrapping
// ErrCorrupt that names the file.
func (s *Store) Assigned() (*corev1.NodeConfigSource, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readSource(assignedFile)
}

// SetAssigned records src as the assigned config source; nil means the
// node's local config. When src differs from the current assignment, or no
// time was recorded yet, it also records the clock's time as AssignedAt,
// before the assignment itself: a crash in between restarts the trial of
// the old assignment rather than shortening the trial of the new one.
func (s *Store) SetAssigned(src *corev1.NodeConfigSource) error {
	if err := validateAssignable(src); err != nil {
		return fmt.Errorf("meta file %q: %w", assignedFile, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.readSource(assignedFile)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return err
	}
	changed := err != nil || !reflect.DeepEqual(cur, src)
	_, recorded, err := s.assignedAt()
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return err
	}
	if changed || !recorded || err != nil {
		now := s.clock.Now().UTC().Format(time.RFC3339Nano)
		if err := s.writeAtomic(filepath.Join(s.metaDir(), assignedAtFile), []byte(now+"\n")); err != nil {
			return fmt.Errorf("meta file %q: %w", assignedAtFile, err)
		}
	}
	if !changed {
		return nil
	}
	return s.writeSource(assignedFile, src)
}

// AssignedAt returns the time at which the current assignment was made. It
// returns false if no time was recorded, as in a store that a kubelet wrote.
func (s *Store) AssignedAt() (time.Time, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.assignedAt()
}

func (s *Store) assignedAt() (time.Time, bool, error) {
	path := filepath.Join(s.metaDir(), assignedAtFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("meta file %q: %w", path, err)
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(data)))
	if err != nil {
		return time.Time{}, false, fmt.Errorf("meta file %q: %w: %w", path, ErrCorrupt, err)
	}
	return t, true, nil
}

// LastKnownGood returns the last-known-good config source; nil means the
// node's local config.
func (s *Store) LastKnownGood() (*corev1.NodeConfigSource, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readSource(lastKnownGoodFile)
}

// SetLastKnownGood records src as the last-known-good config source; nil
// means the node's local config.
func (s *Store) SetLastKnownGood(src *corev1.NodeConfigSource) error {
	if err := validateAssignable(src); err != nil {
		return fmt.Errorf("meta file %q: %w", lastKnownGoodFile, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.readSource(lastKnownGoodFile)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return err
	}
	if err == nil && reflect.DeepEqual(cur, src) {
		return nil
	}
	return s.writeSource(lastKnownGoodFile, src)
}

// LastError returns the error message last recorded by SetLastError, or ""
// if none was.
func (s *Store) LastError() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastError()
}

func (s *Store) lastError() (string, error) {
	path := filepath.Join(s.metaDir(), lastErrorFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("meta file %q: %w", path, err)
	}
	return string(data), nil
}

// SetLastError records msg as the last error; "" clears it.
func (s *Store) SetLastError(msg string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writeAtomic(filepath.Join(s.metaDir(), lastErrorFile), []byte(msg)); err != nil {
		return fmt.Errorf("meta file %q: %w", lastErrorFile, err)
	}
	return nil
}

// SaveBaseline saves data as baseline/<name> unless that file exists, so a
// baseline is captured once and never overwritten until RemoveBaseline. It
// reports whether it wrote the file.
func (s *Store) SaveBaseline(name string, data []byte) (bool, error) {
	if err := validateDirName(name); err != nil {
		return false, fmt.Errorf("baseline: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	path := filepath.Join(s.baselineDir(), name)
	_, err := os.Lstat(path)
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("baseline %q: %w", name, err)
	}
	if err := s.writeAtomic(path, data); err != nil {
		return false, fmt.Errorf("baseline %q: %w", name, err)
	}
	return true, nil
}

// Baseline returns the content of baseline/<name>, and false if it was never
// saved.
func (s *Store) Baseline(name string) ([]byte, bool, error) {
	if err := validateDirName(name); err != nil {
		return nil, false, fmt.Errorf("baseline: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	data, err := os.ReadFile(filepath.Join(s.baselineDir(), name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("baseline %q: %w", name, err)
	}
	return data, true, nil
}

// RemoveBaseline removes baseline/<name> and fsyncs the baseline directory,
// so that the next SaveBaseline saves again. A missing baseline is not an
// error. The removal is one unlink: after a crash the baseline is there or
// gone, never partial.
func (s *Store) RemoveBaseline(name string) error {
	if err := validateDirName(name); err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	path := filepath.Join(s.baselineDir(), name)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := s.fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("baseline %q: %w", name, err)
	}
	if err := s.fsys.SyncDir(s.baselineDir()); err != nil {
		return fmt.Errorf("baseline %q: %w", name, err)
	}
	return nil
}

// GC removes every checkpoint that the record (State: assigned, active,
// last-known-good) does not name, and every uid directory left empty. It
// returns the directories of the checkpoints it removed. It removes nothing
// if the record cannot be read, since it could not tell what is in use.
func (s *Store) GC() ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, _, err := s.state()
	if err != nil {
		return nil, fmt.Errorf("checkpoints: gc: %w", err)
	}
	keep := referenced(st)
	uids, err := os.ReadDir(s.checkpointsDir())
	if err != nil {
		return nil, fmt.Errorf("checkpoints: gc: %w", err)
	}
	var removed []string
	for _, u := range uids {
		if !u.IsDir() || strings.HasPrefix(u.Name(), tmpPrefix) {
			continue
		}
		uidDir := filepath.Join(s.checkpointsDir(), u.Name())
		rvs, err := os.ReadDir(uidDir)
		if err != nil {
			return removed, fmt.Errorf("checkpoints: gc: %w", err)
		}
		left := 0
		for _, rv := range rvs {
			id := checkpointID(types.UID(u.Name()), rv.Name())
			if !rv.IsDir() || strings.HasPrefix(rv.Name(), tmpPrefix) || keep[id] {
				left++
				continue
			}
			dir := filepath.Join(uidDir, rv.Name())
			if err := s.removeDir(dir); err != nil {
				return removed, fmt.Errorf("checkpoint %q: gc: %w", id, err)
			}
			removed = append(removed, dir)
		}
		if left > 0 {
			continue
		}
		if err := s.fsys.Remove(uidDir); err != nil {
			return removed, fmt.Errorf("checkpoints: gc: %w", err)
		}
		if err := s.fsys.SyncDir(s.checkpointsDir()); err != nil {
			return removed, fmt.Errorf("checkpoints: gc: %w", err)
		}
	}
	return removed, nil
}

// removeDir removes dir by first renaming it to a temporary name, so a crash
// never leaves part of it under its own name.
func (s *Store) removeDir(dir string) error {
	parent := filepath.Dir(dir)
	trash := filepath.Join(parent, tmpName())
	if err := s.fsys.Rename(dir, trash); err != nil {
		return err
	}
	if err := s.fsys.SyncDir(parent); err != nil {
		return err
	}
	return s.fsys.RemoveAll(trash)
}

func (s *Store) readSource(name string) (*corev1.NodeConfigSource, error) {
	path := filepath.Join(s.metaDir(), name)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("meta file %q: %w", path, err)
	}
	src, err := s.sourceMemo(name).get(data, decodeSource, (*corev1.NodeConfigSource).DeepCopy)
	if err != nil {
		return nil, fmt.Errorf("meta file %q: %w: %w", path, ErrCorrupt, err)
	}
	return src, nil
}

func (s *Store) writeSource(name string, src *corev1.NodeConfigSource) error {
	data, err := encodeSource(src)
	if err != nil {
		return fmt.Errorf("meta file %q: %w", name, err)
	}
	if err := s.writeAtomic(filepath.Join(s.metaDir(), name), data); err != nil {
		return fmt.Errorf("meta file %q: %w", name, err)
	}
	s.sourceMemo(name).set(data, src.DeepCopy())
	return nil
}

// sourceMemo is the decode memo of the legacy meta file name.
func (s *Store) sourceMemo(name string) *decoded[*corev1.NodeConfigSource] {
	if s.sources == nil {
		s.sources = map[string]*decoded[*corev1.NodeConfigSource]{}
	}
	m := s.sources[name]
	if m == nil {
		m = &decoded[*corev1.NodeConfigSource]{}
		s.sources[name] = m
	}
	return m
}

// writeAtomic replaces path with data: temporary file, fsync, rename, fsync
// of the directory.
func (s *Store) writeAtomic(path string, data []byte) error {
	return atomicfile.WriteFile(s.fsys, path, data, 0o600)
}

// writeNew creates name, writes data and fsyncs it.
func (s *Store) writeNew(name string, data []byte) error {
	return atomicfile.WriteNew(s.fsys, name, data, 0o600)
}

// mkdir creates the directory d unless it exists, and makes its entry in the
// parent durable.
func (s *Store) mkdir(d string) error {
	err := s.fsys.Mkdir(d, 0o700)
	if errors.Is(err, fs.ErrExist) {
		fi, statErr := os.Stat(d)
		if statErr != nil {
			return statErr
		}
		if !fi.IsDir() {
			return fmt.Errorf("%q is not a directory", d)
		}
		return nil
	}
	if err != nil {
		return err
	}
	return s.fsys.SyncDir(filepath.Dir(d))
}

// cleanTemps removes the temporaries left in the directories the store
// writes to.
func (s *Store) cleanTemps() error {
	dirs := []string{s.metaDir(), s.baselineDir(), s.checkpointsDir()}
	uids, err := os.ReadDir(s.checkpointsDir())
	if err != nil {
		return err
	}
	for _, u := range uids {
		if u.IsDir() && !strings.HasPrefix(u.Name(), tmpPrefix) {
			dirs = append(dirs, filepath.Join(s.checkpointsDir(), u.Name()))
		}
	}
	for _, d := range dirs {
		if err := atomicfile.CleanTemps(s.fsys, d); err != nil {
			return err
		}
	}
	return nil
}

// loadDir reads the checkpoint directory dir. The error wraps ErrNotFound if
// dir does not exist.
func loadDir(dir string) (map[string][]byte, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	files := make(map[string][]byte, len(entries))
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return nil, fmt.Errorf("key %q: %w: not a regular file", e.Name(), ErrCorrupt)
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", e.Name(), err)
		}
		files[e.Name()] = data
	}
	return files, nil
}

func checkpointID(uid types.UID, resourceVersion string) string {
	return string(uid) + "/" + resourceVersion
}

func tmpName() string { return atomicfile.TempName() }
