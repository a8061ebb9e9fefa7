// The meta files one at a time: meta/assigned and meta/last-known-good, as
// upstream wrote them, and dkc's older meta/assigned-at and meta/last-error.
// The agent writes them only as derived from its record (SetState in
// state.go); a store without a record, one a kubelet wrote, is read from
// them.

package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

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
