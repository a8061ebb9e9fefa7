// The checkpoints: checkpoints/<uid>/<resourceVersion>/<key>, a ConfigMap's
// files saved whole or not at all, loaded by the source that names them,
// and collected once the record (state.go) names them no more.

package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func (s *Store) checkpointDir(uid types.UID, resourceVersion string) string {
	return filepath.Join(s.checkpointsDir(), string(uid), resourceVersion)
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
