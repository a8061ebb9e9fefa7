package framework

import (
	"sync"
	"syscall"
	"time"
)

// ControllerIdentity is the user the dkc controller runs as in the
// harness: the ServiceAccount of deploy/controller.yaml, as a client
// certificate's user name.
const ControllerIdentity = "system:serviceaccount:kube-system:dkc-controller"

// Controller is a `kubectl-dkc controller` process on the host, a replica
// of deploy/controller.yaml's Deployment.
type Controller struct {
	// Identity is its name in the controller's Lease.
	Identity string
	LogPath  string
	p        *process
}

// dkcControllers are the controllers the cluster started, stopped with it.
type dkcControllers struct {
	mu   sync.Mutex
	list []*Controller
}

// StartController starts `binary controller` as identity, with kubeconfig
// (see UserKubeconfig(ControllerIdentity)) and fast lease timings, so that
// a standby takes over within seconds; extra flags come last.
func (c *Cluster) StartController(binary, kubeconfig, identity string, extra ...string) (*Controller, error) {
	args := append([]string{binary, "controller",
		"--kubeconfig", kubeconfig, "--identity", identity, "--health-bind-address", "0",
		"--leader-elect-lease-duration", "6s", "--leader-elect-renew-deadline", "4s", "--leader-elect-retry-period", "1s",
		"-v", "2",
	}, extra...)
	p := c.newProcess("controller-"+identity, args, false)
	if err := p.start(); err != nil {
		return nil, err
	}
	ctl := &Controller{Identity: identity, LogPath: p.logPath, p: p}
	c.dkcControllers.mu.Lock()
	c.dkcControllers.list = append(c.dkcControllers.list, ctl)
	c.dkcControllers.mu.Unlock()
	return ctl, nil
}

// PID is the controller's PID, or 0 once it ended.
func (ctl *Controller) PID() int { return ctl.p.pid() }

// Stop ends the controller with SIGTERM (SIGKILL after 15s) and waits for
// it.
func (ctl *Controller) Stop() error { return ctl.p.stop(15 * time.Second) }

// Kill ends the controller with SIGKILL, as a crash or a lost node would,
// and waits for it.
func (ctl *Controller) Kill() error {
	_ = ctl.p.signal(syscall.SIGKILL)
	return ctl.p.stop(15 * time.Second)
}

func (c *Cluster) stopDKCControllers() {
	c.dkcControllers.mu.Lock()
	defer c.dkcControllers.mu.Unlock()
	for _, ctl := range c.dkcControllers.list {
		_ = ctl.Stop()
	}
}
