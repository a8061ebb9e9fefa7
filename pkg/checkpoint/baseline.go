// The baseline: baseline/<name>, the node's local config as it was before
// dkc put its own in place, captured once and kept until RemoveBaseline.

package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

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
