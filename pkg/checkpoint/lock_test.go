package checkpoint

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAcquireLockTwiceInOneProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dkc")
	l, err := AcquireLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, LockFileName)
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strconv.Itoa(os.Getpid())+"\n", string(got)); diff != "" {
		t.Errorf("lock file content (-want +got):\n%s", diff)
	}

	// flock(2) locks belong to the open file description, so a second open
	// in the same process conflicts as a second agent would.
	_, err = AcquireLock(dir)
	var locked *LockedError
	if !errors.As(err, &locked) {
		t.Fatalf("second AcquireLock: %v, want a *LockedError", err)
	}
	want := &LockedError{Dir: dir, Path: path, PID: os.Getpid()}
	if diff := cmp.Diff(want, locked); diff != "" {
		t.Errorf("LockedError (-want +got):\n%s", diff)
	}
	wantMsg := "checkpoint store " + dir + " is in use: the process with PID " + strconv.Itoa(os.Getpid()) +
		" holds the lock " + path + "; run one agent per node and stop the other one first"
	if diff := cmp.Diff(wantMsg, err.Error()); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}

	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Errorf("second Release: %v", err)
	}
	l2, err := AcquireLock(dir)
	if err != nil {
		t.Fatalf("AcquireLock after Release: %v", err)
	}
	defer l2.Release()
	if _, err := os.Stat(path); err != nil {
		t.Errorf("lock file after Release: %v", err)
	}
}

func TestAcquireLockStaleFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, LockFileName)
	// A file left by an agent that was killed: nobody holds the lock.
	if err := os.WriteFile(path, []byte("999999999\nleftover bytes that must go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := AcquireLock(dir)
	if err != nil {
		t.Fatalf("AcquireLock over a stale lock file: %v", err)
	}
	defer l.Release()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strconv.Itoa(os.Getpid())+"\n", string(got)); diff != "" {
		t.Errorf("lock file content (-want +got):\n%s", diff)
	}
}

func TestLockedErrorWithoutPID(t *testing.T) {
	err := &LockedError{Dir: "/var/lib/dkc", Path: "/var/lib/dkc/agent.lock"}
	want := "checkpoint store /var/lib/dkc is in use: another process holds the lock /var/lib/dkc/agent.lock; run one agent per node and stop the other one first"
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestAcquireLockErrors(t *testing.T) {
	if _, err := AcquireLock(""); err == nil || err.Error() != "checkpoint store lock: directory must not be empty" {
		t.Errorf("AcquireLock(\"\") = %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := AcquireLock(file)
	var locked *LockedError
	if err == nil || errors.As(err, &locked) || !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("AcquireLock on a file: %v, want ENOTDIR", err)
	}
}

// lockHelperEnv makes the test binary a process that takes the lock of the
// directory it names, says "locked" and waits to be killed.
const lockHelperEnv = "DKC_TEST_LOCK_HELPER_DIR"

func TestLockHelperProcess(t *testing.T) {
	dir := os.Getenv(lockHelperEnv)
	if dir == "" {
		t.Skip("helper process for TestAcquireLockAcrossProcesses")
	}
	if _, err := AcquireLock(dir); err != nil {
		os.Stdout.WriteString("error: " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Stdout.WriteString("locked\n")
	time.Sleep(time.Minute)
	os.Exit(0)
}

// TestAcquireLockAcrossProcesses runs a second process that holds the lock:
// this process is refused with the holder's PID, and once the holder is
// killed with SIGKILL, as a crashed agent would be, the lock is free.
func TestAcquireLockAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHelperProcess$")
	cmd.Env = append(os.Environ(), lockHelperEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		t.Fatalf("helper process: %q, %v", line, err)
	}

	began := time.Now()
	_, err = AcquireLock(dir)
	var locked *LockedError
	if !errors.As(err, &locked) {
		t.Fatalf("AcquireLock while another process holds it: %v, want a *LockedError", err)
	}
	if locked.PID != cmd.Process.Pid {
		t.Errorf("LockedError.PID = %d, want the holder's %d", locked.PID, cmd.Process.Pid)
	}
	if d := time.Since(began); d > time.Second {
		t.Errorf("AcquireLock waited %s; it must not block", d)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	l, err := AcquireLock(dir)
	if err != nil {
		t.Fatalf("AcquireLock after the holder was killed: %v", err)
	}
	l.Release()
}
