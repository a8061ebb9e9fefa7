package checkpoint

import (
	"io"
	"os"
)

// fileSystem holds the write effects of the store, so tests can record
// their order and simulate a crash between two of them. Reads go to the os
// package directly.
type fileSystem interface {
	// Create creates a new file with mode 0600; it fails if name exists.
	Create(name string) (file, error)
	// Mkdir creates a directory with mode 0700.
	Mkdir(name string) error
	Rename(oldpath, newpath string) error
	// SyncDir fsyncs a directory, making renames and removals in it durable.
	SyncDir(dir string) error
	Remove(name string) error
	RemoveAll(path string) error
}

type file interface {
	io.Writer
	Sync() error
	Close() error
}

// osFS is the real file system.
type osFS struct{}

var _ fileSystem = osFS{}

func (osFS) Create(name string) (file, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
}

func (osFS) Mkdir(name string) error { return os.Mkdir(name, 0o700) }

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
