package kubelet

import (
	"context"
	"fmt"
	"time"
)

// unitManager is the part of a systemd D-Bus connection the restarter uses;
// *dbus.Conn of github.com/coreos/go-systemd/v22/dbus implements it. Each
// method enqueues a job and sends its result to ch when the job finished:
// "done", "canceled", "timeout", "failed", "dependency" or "skipped".
type unitManager interface {
	RestartUnitContext(ctx context.Context, name, mode string, ch chan<- string) (int, error)
	StopUnitContext(ctx context.Context, name, mode string, ch chan<- string) (int, error)
	StartUnitContext(ctx context.Context, name, mode string, ch chan<- string) (int, error)
	Close()
}

// SystemdRestarter restarts the kubelet's systemd unit over D-Bus and waits
// for the job's result, as `systemctl restart` does.
type SystemdRestarter struct {
	// Unit is the kubelet's unit, such as "kubelet.service".
	Unit string
	// Timeout bounds each job; a job still running then is an error.
	Timeout time.Duration
	// Queued, when set, is called after each job is queued and before the
	// restarter waits for it. A unit ordered before the kubelet's (the
	// agent's Type=notify unit) that is still starting holds the start of
	// a kubelet job queued meanwhile: Queued is where it reports itself
	// started, so that the job runs once, and not never.
	Queued func()
	// connect opens a connection to systemd; one is opened per call, so a
	// restarted systemd (daemon-reexec) does not leave a dead connection.
	connect func(ctx context.Context) (unitManager, error)
}

var _ Restarter = &SystemdRestarter{}

// NewSystemdRestarter returns a Restarter for systemd unit unit that fails
// when a job takes longer than timeout.
func NewSystemdRestarter(unit string, timeout time.Duration) *SystemdRestarter {
	return &SystemdRestarter{Unit: unit, Timeout: timeout, connect: connectSystemd}
}

// Restart runs a restart job for the unit, in mode "replace".
func (r *SystemdRestarter) Restart(ctx context.Context) error {
	return r.job(ctx, "restart", unitManager.RestartUnitContext)
}

// Stop runs a stop job for the unit.
func (r *SystemdRestarter) Stop(ctx context.Context) error {
	return r.job(ctx, "stop", unitManager.StopUnitContext)
}

// Start runs a start job for the unit.
func (r *SystemdRestarter) Start(ctx context.Context) error {
	return r.job(ctx, "start", unitManager.StartUnitContext)
}

type jobFunc func(m unitManager, ctx context.Context, name, mode string, ch chan<- string) (int, error)

func (r *SystemdRestarter) job(ctx context.Context, verb string, enqueue jobFunc) error {
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.Timeout)
		defer cancel()
	}
	m, err := r.connect(ctx)
	if err != nil {
		return fmt.Errorf("%s unit %s: connect to systemd: %w", verb, r.Unit, err)
	}
	defer m.Close()
	// Buffered: the connection blocks until the result is read.
	ch := make(chan string, 1)
	if _, err := enqueue(m, ctx, r.Unit, "replace", ch); err != nil {
		return fmt.Errorf("%s unit %s: %w", verb, r.Unit, err)
	}
	if r.Queued != nil {
		r.Queued()
	}
	select {
	case result := <-ch:
		if result != "done" {
			return fmt.Errorf("%s unit %s: job %s", verb, r.Unit, result)
		}
		return nil
	case <-ctx.Done():
		if r.Timeout > 0 && ctx.Err() == context.DeadlineExceeded {
			return fmt.Errorf("%s unit %s: job did not finish within %s", verb, r.Unit, r.Timeout)
		}
		return fmt.Errorf("%s unit %s: %w", verb, r.Unit, ctx.Err())
	}
}
