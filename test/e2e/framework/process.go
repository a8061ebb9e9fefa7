package framework

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// process is one component the harness started. It is ended by its own PID
// and by nothing else. A supervised process is started again when it exits,
// as systemd's Restart=always does for a kubelet.
type process struct {
	name         string
	argv         []string
	logPath      string
	pidFile      string
	supervise    bool
	restartDelay time.Duration

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the current cmd exits
	stopped bool          // Stop was called; do not restart
	starts  int
	done    chan struct{} // closed when the supervisor loop ends
	logf    func(format string, args ...any)
}

func (p *process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("%s: already running as pid %d", p.name, p.cmd.Process.Pid)
	}
	p.stopped = false
	if err := p.spawnLocked(); err != nil {
		return err
	}
	p.done = make(chan struct{})
	go p.loop(p.cmd, p.exited, p.done)
	return nil
}

func (p *process) spawnLocked() error {
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s: open log: %w", p.name, err)
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "==== dkc harness: start %d of %s at %s\n", p.starts+1, p.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// If the harness dies, so do its components.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: start %s: %w", p.name, p.argv[0], err)
	}
	p.starts++
	p.cmd = cmd
	p.exited = make(chan struct{})
	if p.pidFile != "" {
		if err := writeFileAtomic(p.pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n")); err != nil {
			return err
		}
	}
	return nil
}

// loop waits for the process and, while supervised and not stopped, starts
// it again after restartDelay.
func (p *process) loop(cmd *exec.Cmd, exited, done chan struct{}) {
	defer close(done)
	for {
		err := cmd.Wait()
		close(exited)
		p.mu.Lock()
		if p.stopped || !p.supervise {
			p.cmd = nil
			p.mu.Unlock()
			return
		}
		p.logf("%s exited (%v); restarting in %s", p.name, err, p.restartDelay)
		p.mu.Unlock()
		time.Sleep(p.restartDelay)
		p.mu.Lock()
		if p.stopped {
			p.cmd = nil
			p.mu.Unlock()
			return
		}
		if err := p.spawnLocked(); err != nil {
			p.logf("%s: %v", p.name, err)
			p.cmd = nil
			p.mu.Unlock()
			return
		}
		cmd, exited = p.cmd, p.exited
		p.mu.Unlock()
	}
}

// pid is the PID of the running process, or 0.
func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// stop ends the process by its PID: SIGTERM, then SIGKILL after grace.
func (p *process) stop(grace time.Duration) error {
	p.mu.Lock()
	p.stopped = true
	cmd, exited, done := p.cmd, p.exited, p.done
	p.mu.Unlock()
	if cmd == nil {
		if done != nil {
			<-done
		}
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		p.logf("%s (pid %d) did not stop in %s; killing it", p.name, cmd.Process.Pid, grace)
		_ = cmd.Process.Kill()
		<-exited
	}
	<-done
	if p.pidFile != "" {
		_ = os.Remove(p.pidFile)
	}
	return nil
}

// signal sends sig to the running process.
func (p *process) signal(sig os.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return errors.New(p.name + " is not running")
	}
	return p.cmd.Process.Signal(sig)
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
