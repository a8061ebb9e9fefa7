// Package atomicfile is dkc's one way to replace a file on disk so that a
// crash at any point leaves the old content or the new one, never a torn
// file, and the change is durable once the call returns:
//
//	temporary file in the same directory → write → fsync → rename over the
//	target → fsync of the directory
//
// Every write goes through an FS, so that tests can inject a crash at any
// write, rename or fsync (package atomicfiletest). The checkpoint store, the
// kubelet config writer and `kubectl dkc snapshot --output-dir` use it.
//
// Temporary names start with TempPrefix and never end in ".conf", so a
// kubelet that reads its --config-dir meanwhile never reads one as a
// drop-in. CleanTemps removes those a crash left behind.
package atomicfile

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// TempPrefix starts the name of every temporary file and directory.
const TempPrefix = ".dkc-tmp-"

// FS holds the write effects on the file system. Reads go to the os
// package directly.
type FS interface {
	// Create creates a new file with mode perm; it fails if name exists.
	Create(name string, perm fs.FileMode) (File, error)
	// Mkdir creates a directory with mode perm.
	Mkdir(name string, perm fs.FileMode) error
	Rename(oldpath, newpath string) error
	// SyncDir fsyncs a directory, making renames and removals in it durable.
	SyncDir(dir string) error
	Remove(name string) error
	RemoveAll(path string) error
}

// File is a file opened by FS.Create.
type File interface {
	io.Writer
	Chmod(mode fs.FileMode) error
	Chown(uid, gid int) error
	Sync() error
	Close() error
}

// OS is the real file system.
var OS FS = osFS{}

type osFS struct{}

func (osFS) Create(name string, perm fs.FileMode) (File, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
}

func (osFS) Mkdir(name string, perm fs.FileMode) error { return os.Mkdir(name, perm) }

func (osFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}

func (osFS) Remove(name string) error { return os.Remove(name) }

func (osFS) RemoveAll(path string) error { return os.RemoveAll(path) }

// TempName returns a new temporary name: TempPrefix and random letters.
func TempName() string { return TempPrefix + rand.Text() }

// WriteFile replaces the file at path with data: it writes a temporary
// file in the same directory, fsyncs it, renames it over path and fsyncs
// the directory. The new file keeps the old one's mode and owner; a new file
// gets mode perm. A symlink at path is followed, so its target is replaced.
// A nil fsys is OS.
func WriteFile(fsys FS, path string, data []byte, perm fs.FileMode) error {
	if fsys == nil {
		fsys = OS
	}
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
	tmp := filepath.Join(dir, TempName())
	if err := writeNew(fsys, tmp, data, perm, uid, gid); err != nil {
		_ = fsys.Remove(tmp)
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		_ = fsys.Remove(tmp)
		return err
	}
	return fsys.SyncDir(dir)
}

// WriteNew creates the file name, which must not exist, with mode perm,
// writes data and fsyncs it. The caller makes its directory entry durable,
// for example by renaming a directory of such files into place and fsyncing
// its parent.
func WriteNew(fsys FS, name string, data []byte, perm fs.FileMode) error {
	return writeNew(fsys, name, data, perm, -1, -1)
}

func writeNew(fsys FS, name string, data []byte, perm fs.FileMode, uid, gid int) error {
	f, err := fsys.Create(name, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	// Create's mode is subject to the umask; Chmod is not.
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if uid >= 0 && (uid != os.Geteuid() || gid != os.Getegid()) {
		if err := f.Chown(uid, gid); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Remove removes the file name and fsyncs its directory. A missing file is
// not an error.
func Remove(fsys FS, name string) error {
	if fsys == nil {
		fsys = OS
	}
	if err := fsys.Remove(name); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return fsys.SyncDir(filepath.Dir(name))
}

// CleanTemps removes the temporaries (names starting with TempPrefix) that
// a crash left in dir, and fsyncs dir if it removed any. A missing dir has
// none.
func CleanTemps(fsys FS, dir string) error {
	if fsys == nil {
		fsys = OS
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	cleaned := false
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), TempPrefix) {
			continue
		}
		if err := fsys.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("remove temporary %q: %w", e.Name(), err)
		}
		cleaned = true
	}
	if cleaned {
		return fsys.SyncDir(dir)
	}
	return nil
}
