// The store itself: opening it under <dir>/store (doc.go has its layout),
// and the file primitives every part of it writes through.

package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
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

func tmpName() string { return atomicfile.TempName() }
