package kubelet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// maxOutput is how much of a command's output an error quotes, from its end.
const maxOutput = 4096

// ExecRestarter restarts the kubelet by running a command, such as
// `systemctl restart kubelet` or a supervisor's script. The command must
// return once the restart finished; a non-zero exit is an error.
type ExecRestarter struct {
	// RestartCommand restarts the kubelet (the agent's --restart-command).
	RestartCommand []string
	// StopCommand and StartCommand stop and start it, around a state-file
	// removal (--stop-command, --start-command). Optional.
	StopCommand  []string
	StartCommand []string
	// Timeout bounds each command. When it passes, the command's whole
	// process group is killed and the call fails.
	Timeout time.Duration
}

var _ Restarter = &ExecRestarter{}

// NewExecRestarter returns a Restarter that runs command, killing it after
// timeout. Set StopCommand and StartCommand on the result to support Stop and
// Start.
func NewExecRestarter(command []string, timeout time.Duration) *ExecRestarter {
	return &ExecRestarter{RestartCommand: command, Timeout: timeout}
}

// Restart runs RestartCommand.
func (r *ExecRestarter) Restart(ctx context.Context) error {
	return r.run(ctx, "restart", "--restart-command", r.RestartCommand)
}

// Stop runs StopCommand.
func (r *ExecRestarter) Stop(ctx context.Context) error {
	return r.run(ctx, "stop", "--stop-command", r.StopCommand)
}

// Start runs StartCommand.
func (r *ExecRestarter) Start(ctx context.Context) error {
	return r.run(ctx, "start", "--start-command", r.StartCommand)
}

func (r *ExecRestarter) run(ctx context.Context, verb, flag string, argv []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("exec restarter: no %s configured", flag)
	}
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.Timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	// The command runs in its own process group, so that a timeout ends
	// it together with whatever it started (a shell's sleep, systemctl).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A child that escaped the group may still hold the output pipe.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		if errors.Is(ctxErr, context.DeadlineExceeded) && r.Timeout > 0 {
			return fmt.Errorf("%s kubelet: %s: timed out after %s%s", verb, quoteArgv(argv), r.Timeout, tail(out.Bytes()))
		}
		return fmt.Errorf("%s kubelet: %s: %w%s", verb, quoteArgv(argv), ctxErr, tail(out.Bytes()))
	}
	return fmt.Errorf("%s kubelet: %s: %w%s", verb, quoteArgv(argv), err, tail(out.Bytes()))
}

func quoteArgv(argv []string) string {
	return fmt.Sprintf("%q", strings.Join(argv, " "))
}

// tail formats the end of a command's output for an error message.
func tail(out []byte) string {
	out = bytes.TrimSpace(out)
	if len(out) == 0 {
		return ""
	}
	if len(out) > maxOutput {
		out = append([]byte("..."), out[len(out)-maxOutput:]...)
	}
	return ": " + string(out)
}
