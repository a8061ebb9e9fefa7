package rollout

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// detach starts this same command again in the background, in its own
// session so that it outlives the terminal, with --driver=name: it drives
// the rollout that was just created and logs to a file.
func (o *StartOptions) detach(name string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("start the rollout's driver: %w: drive it with kubectl dkc rollout resume %s", err, name)
	}
	log, err := os.CreateTemp("", "dkc-rollout-"+name+"-*.log")
	if err != nil {
		return fmt.Errorf("start the rollout's driver: %w: drive it with kubectl dkc rollout resume %s", err, name)
	}
	defer log.Close()
	cmd := exec.Command(exe, append(os.Args[1:], "--driver="+name)...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the rollout's driver: %w: drive it with kubectl dkc rollout resume %s", err, name)
	}
	fmt.Fprintf(o.ErrOut, "rollout/%s is driven in the background by pid %d (log: %s); follow it with kubectl dkc rollout status %s -w\n",
		name, cmd.Process.Pid, log.Name(), name)
	return cmd.Process.Release()
}
