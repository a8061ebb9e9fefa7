package agent

import (
	"context"
	"sync"

	"github.com/coreos/go-systemd/v22/daemon"
	"k8s.io/klog/v2"

	"github.com/kubectl-dkc/dkc/pkg/kubelet"
)

// readiness tells a service manager, once, that the agent's start-up has
// put the kubelet's config where the record says: READY=1 on
// $NOTIFY_SOCKET for deploy/systemd's Type=notify unit, which is ordered
// Before=kubelet.service, so that systemd starts the kubelet only then.
// Without $NOTIFY_SOCKET (a DaemonSet, a shell) it sends nothing.
//
// Start-up that rewrote the kubelet's config restarts the kubelet before
// it returns. Its job for kubelet.service, queued while this unit is still
// starting, waits for READY=1 (kubelet.service is ordered after this unit),
// so ready is also called as that job is queued: the systemd restarter's
// Queued, or before an exec restarter's command (readyFirst). Not earlier:
// at boot the kubelet's pending start job merges into the queued restart
// job, and the kubelet starts once.
type readiness struct {
	once sync.Once
	// notify sends a state to the service manager: daemon.SdNotify.
	notify func(state string) (sent bool, err error)
	logger klog.Logger
}

func newReadiness(logger klog.Logger) *readiness {
	return &readiness{
		notify: func(state string) (bool, error) { return daemon.SdNotify(false, state) },
		logger: logger,
	}
}

// status sends a STATUS= line, what `systemctl status` shows.
func (r *readiness) status(msg string) {
	r.send("STATUS=" + msg)
}

// ready sends READY=1 with a status, the first time it is called.
func (r *readiness) ready() {
	r.once.Do(func() {
		if r.send(daemon.SdNotifyReady + "\nSTATUS=Kubelet config in place; watching the node and its assigned ConfigMap") {
			r.logger.Info("Told systemd the agent is ready (READY=1)")
		}
	})
}

func (r *readiness) send(state string) bool {
	sent, err := r.notify(state)
	if err != nil {
		// The unit then fails on its TimeoutStartSec, which says more
		// than an agent that exits here would.
		r.logger.Error(err, "Could not notify systemd", "state", state)
	}
	return sent
}

// readyFirst calls ready before each job of a restarter that cannot say
// when its job is queued, such as --restart-command 'systemctl restart
// kubelet', which would otherwise wait for READY=1 while start-up waits
// for it.
type readyFirst struct {
	kubelet.Restarter
	ready func()
}

func (r readyFirst) Restart(ctx context.Context) error {
	r.ready()
	return r.Restarter.Restart(ctx)
}

func (r readyFirst) Stop(ctx context.Context) error {
	r.ready()
	return r.Restarter.Stop(ctx)
}

func (r readyFirst) Start(ctx context.Context) error {
	r.ready()
	return r.Restarter.Start(ctx)
}
