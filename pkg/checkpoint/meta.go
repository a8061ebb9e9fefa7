// The meta files one at a time: meta/assigned and meta/last-known-good, as
// upstream wrote them, and dkc's older meta/assigned-at and meta/last-error.
// The store writes them only as derived from its record (SetState in
// state.go), and reads them only to adopt a store without a record, one a
// kubelet or an older dkc wrote (State).

package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// assignedAt returns the time in meta/assigned-at, and false if there is
// none, as in a store that a kubelet wrote.
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

// lastError returns the error in meta/last-error, or "" if there is none.
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
