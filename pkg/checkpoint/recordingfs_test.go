package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"

	"github.com/kubectl-dkc/dkc/pkg/atomicfile"
)

var errCrashed = errors.New("simulated crash")

// recordingFS performs the real file system operations and records them,
// with paths relative to root and temporary names shown as "<tmp>". If
// crashAt returns true for an operation, that operation and every later one
// fail without touching the disk, as if the process had died there.
type recordingFS struct {
	root    string
	ops     []string
	crashAt func(i int, op string) bool
	crashed bool
}

var _ atomicfile.FS = &recordingFS{}

var tmpRE = regexp.MustCompile(regexp.QuoteMeta(tmpPrefix) + `[A-Z0-9]+`)

func (r *recordingFS) rel(p string) string {
	if rel, err := filepath.Rel(r.root, p); err == nil {
		p = rel
	}
	return tmpRE.ReplaceAllString(p, "<tmp>")
}

// do records op and reports whether it may run.
func (r *recordingFS) do(op string) error {
	if r.crashed {
		return errCrashed
	}
	if r.crashAt != nil && r.crashAt(len(r.ops), op) {
		r.crashed = true
		return errCrashed
	}
	r.ops = append(r.ops, op)
	return nil
}

func (r *recordingFS) Create(name string, perm fs.FileMode) (atomicfile.File, error) {
	if err := r.do("create " + r.rel(name)); err != nil {
		return nil, err
	}
	f, err := atomicfile.OS.Create(name, perm)
	if err != nil {
		return nil, err
	}
	return &recordingFile{r: r, f: f, name: r.rel(name)}, nil
}

func (r *recordingFS) Mkdir(name string, perm fs.FileMode) error {
	if err := r.do("mkdir " + r.rel(name)); err != nil {
		return err
	}
	return atomicfile.OS.Mkdir(name, perm)
}

func (r *recordingFS) Rename(oldpath, newpath string) error {
	if err := r.do(fmt.Sprintf("rename %s %s", r.rel(oldpath), r.rel(newpath))); err != nil {
		return err
	}
	return atomicfile.OS.Rename(oldpath, newpath)
}

func (r *recordingFS) SyncDir(dir string) error {
	if err := r.do("syncdir " + r.rel(dir)); err != nil {
		return err
	}
	return atomicfile.OS.SyncDir(dir)
}

func (r *recordingFS) Remove(name string) error {
	if err := r.do("remove " + r.rel(name)); err != nil {
		return err
	}
	return atomicfile.OS.Remove(name)
}

func (r *recordingFS) RemoveAll(path string) error {
	if err := r.do("removeall " + r.rel(path)); err != nil {
		return err
	}
	return atomicfile.OS.RemoveAll(path)
}

type recordingFile struct {
	r    *recordingFS
	f    atomicfile.File
	name string
}

// Chmod and Chown are not recorded: they change no directory entry.
func (f *recordingFile) Chmod(mode fs.FileMode) error { return f.f.Chmod(mode) }
func (f *recordingFile) Chown(uid, gid int) error     { return f.f.Chown(uid, gid) }

func (f *recordingFile) Write(p []byte) (int, error) {
	if err := f.r.do("write " + f.name); err != nil {
		return 0, err
	}
	return f.f.Write(p)
}

func (f *recordingFile) Sync() error {
	if err := f.r.do("sync " + f.name); err != nil {
		return err
	}
	return f.f.Sync()
}

func (f *recordingFile) Close() error {
	if err := f.r.do("close " + f.name); err != nil {
		f.f.Close() // the kernel closes a dead process's files
		return err
	}
	return f.f.Close()
}
