// Package atomicfiletest holds a fault-injecting atomicfile.FS for crash
// tests.
package atomicfiletest

import (
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/kubectl-dkc/dkc/pkg/atomicfile"
)

// ErrCrashed is returned by every operation of a FaultFS from its crash on:
// the process is taken to have died there, so nothing after it reaches the
// disk.
var ErrCrashed = errors.New("simulated crash")

// FaultFS passes operations to FS (default atomicfile.OS) and counts them:
// Create, each Write, Chmod, Chown, file Sync, Close, Mkdir, Rename, SyncDir,
// Remove and RemoveAll. The CrashAt-th operation (1-based; 0: never) and
// every later one fail with ErrCrashed and do nothing. CrashIf, when set,
// crashes at the first operation it returns true for.
//
// The crash model is a killed process, not a power cut: what an operation
// did before the crash stays on disk, fsynced or not. NoSync skips the real
// fsyncs (they still count), which makes a campaign of thousands of crash
// points fast under that model.
type FaultFS struct {
	FS      atomicfile.FS
	CrashAt int
	CrashIf func(op, path string) bool
	NoSync  bool

	mu      sync.Mutex
	ops     int
	crashed bool
	// Trace records "op path" of every operation, crashed or not.
	Trace []string
}

var _ atomicfile.FS = &FaultFS{}

// Ops is the number of operations counted so far.
func (f *FaultFS) Ops() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops
}

// Crashed reports whether the crash happened.
func (f *FaultFS) Crashed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.crashed
}

// step counts one operation and reports ErrCrashed when it is at or after
// the crash.
func (f *FaultFS) step(op, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops++
	f.Trace = append(f.Trace, op+" "+path)
	if !f.crashed && (f.ops == f.CrashAt || (f.CrashIf != nil && f.CrashIf(op, path))) {
		f.crashed = true
	}
	if f.crashed {
		return fmt.Errorf("%s %s: %w", op, path, ErrCrashed)
	}
	return nil
}

func (f *FaultFS) fs() atomicfile.FS {
	if f.FS == nil {
		return atomicfile.OS
	}
	return f.FS
}

func (f *FaultFS) Create(name string, perm fs.FileMode) (atomicfile.File, error) {
	if err := f.step("create", name); err != nil {
		return nil, err
	}
	file, err := f.fs().Create(name, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{fs: f, name: name, f: file}, nil
}

func (f *FaultFS) Mkdir(name string, perm fs.FileMode) error {
	if err := f.step("mkdir", name); err != nil {
		return err
	}
	return f.fs().Mkdir(name, perm)
}

func (f *FaultFS) Rename(oldpath, newpath string) error {
	if err := f.step("rename", newpath); err != nil {
		return err
	}
	return f.fs().Rename(oldpath, newpath)
}

func (f *FaultFS) SyncDir(dir string) error {
	if err := f.step("syncdir", dir); err != nil {
		return err
	}
	if f.NoSync {
		return nil
	}
	return f.fs().SyncDir(dir)
}

func (f *FaultFS) Remove(name string) error {
	if err := f.step("remove", name); err != nil {
		return err
	}
	return f.fs().Remove(name)
}

func (f *FaultFS) RemoveAll(path string) error {
	if err := f.step("removeall", path); err != nil {
		return err
	}
	return f.fs().RemoveAll(path)
}

type faultFile struct {
	fs   *FaultFS
	name string
	f    atomicfile.File
}

func (ff *faultFile) Write(p []byte) (int, error) {
	if err := ff.fs.step("write", ff.name); err != nil {
		return 0, err
	}
	return ff.f.Write(p)
}

func (ff *faultFile) Chmod(mode fs.FileMode) error {
	if err := ff.fs.step("chmod", ff.name); err != nil {
		return err
	}
	return ff.f.Chmod(mode)
}

func (ff *faultFile) Chown(uid, gid int) error {
	if err := ff.fs.step("chown", ff.name); err != nil {
		return err
	}
	return ff.f.Chown(uid, gid)
}

func (ff *faultFile) Sync() error {
	if err := ff.fs.step("fsync", ff.name); err != nil {
		return err
	}
	if ff.fs.NoSync {
		return nil
	}
	return ff.f.Sync()
}

func (ff *faultFile) Close() error {
	// A crashed process's files are closed by the kernel: close for real,
	// but count the step.
	err := ff.fs.step("close", ff.name)
	if cerr := ff.f.Close(); err == nil {
		err = cerr
	}
	return err
}
