package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFileName is the file under the agent's --dynamic-config-dir that one
// agent process holds an exclusive flock(2) on for as long as it runs. It
// holds that process's PID, for the error of the next one.
const LockFileName = "agent.lock"

// Lock is an exclusive lock on a store directory. The kernel releases it when
// the process that holds it ends, however it ends, so a lock file left by a
// killed agent never blocks the next one.
type Lock struct {
	f *os.File
}

// LockedError says that another process holds the lock on a store directory.
type LockedError struct {
	// Dir is the store directory, Path its lock file.
	Dir, Path string
	// PID is the holder's PID as it recorded it, 0 when unknown. An agent in
	// a container records its PID in its own PID namespace.
	PID int
}

func (e *LockedError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = "the process with PID " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("checkpoint store %s is in use: %s holds the lock %s; run one agent per node and stop the other one first", e.Dir, holder, e.Path)
}

// AcquireLock takes the exclusive lock of the store under dir, creating dir
// as needed, and records the caller's PID in the lock file. It does not
// wait: when another process holds the lock, it returns a *LockedError that
// names it.
func AcquireLock(dir string) (*Lock, error) {
	if dir == "" {
		return nil, errors.New("checkpoint store lock: directory must not be empty")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint store lock %q: %w", dir, err)
	}
	path := filepath.Join(dir, LockFileName)
	// O_CLOEXEC (set by the os package): a kubelet that the agent's restart
	// command starts must not inherit, and so keep, the lock.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("checkpoint store lock %q: %w", path, err)
	}
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &LockedError{Dir: dir, Path: path, PID: holderPID(path)}
		}
		return nil, fmt.Errorf("checkpoint store lock %q: %w", path, err)
	}
	if err := recordPID(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("checkpoint store lock %q: record PID: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Release releases the lock. The lock file stays: removing it would let a
// third process lock a new file while a second one still waits on the old.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the only descriptor releases the flock
	l.f = nil
	return err
}

func recordPID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// holderPID reads the PID that the lock's holder recorded, or 0. A holder
// that has just taken the lock may not have written it yet.
func holderPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
