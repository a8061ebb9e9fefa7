package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// outageGrace is the agent's --apiserver-grace-period in
// TestAPIServerOutage.
const outageGrace = 10 * time.Second

// TestAPIServerOutage stops the real apiserver under an agent, at the
// default verbosity, whose node runs an applied config, and starts it
// again. While the apiserver is away the agent logs so, its /readyz turns
// 503 after --apiserver-grace-period and names the error, its /healthz
// stays ok, and the kubelet keeps running the config it ran, unrestarted.
// Once the apiserver is back the agent is ready again and logs how long the
// outage lasted.
func TestAPIServerOutage(t *testing.T) {
	t.Parallel() // docs/development.md, "Tests in parallel"
	c := framework.Setup(t, framework.Options{Nodes: 1})
	ctx := context.Background()
	n := c.Nodes[0]
	kubeconfig := framework.AgentKubeconfig(t, c)
	ag, err := n.StartAgent(framework.DKCBinary(), n.AgentArgs(framework.AgentOptions{
		Kubeconfig:    kubeconfig,
		TrialDuration: 5 * time.Second,
		Extra:         []string{"--apiserver-grace-period", outageGrace.String()},
	}))
	if err != nil {
		t.Fatal(err)
	}
	healthz, readyz := "http://"+n.IP+":10391/healthz", "http://"+n.IP+":10391/readyz"
	agentLog := func() string {
		b, err := os.ReadFile(ag.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	createConfigMap(t, c, "outage-a", nodeConfig(t, n, func(cfg map[string]any) { cfg["maxPods"] = 57 }))
	mustDKC(t, c, "", "assign", n.Name, "--config", "outage-a")
	eventuallyStatus(t, c, n.Name, time.Minute, Active("outage-a"), LKG("outage-a"), NoError())
	waitFor(t, 10*time.Second, "/readyz ok", func() bool {
		body, err := framework.HTTPGet(readyz)
		return err == nil && body == "ok"
	})
	pid, starts := n.KubeletPID(), n.KubeletStarts()
	config, err := os.ReadFile(n.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	keptKubelet := func(when string) {
		t.Helper()
		if n.KubeletPID() != pid || n.KubeletStarts() != starts {
			t.Errorf("%s: kubelet restarted (PID %d -> %d, starts %d -> %d)", when, pid, n.KubeletPID(), starts, n.KubeletStarts())
		}
		if now, err := os.ReadFile(n.ConfigPath); err != nil || string(now) != string(config) {
			t.Errorf("%s: kubelet config changed (%v):\n%s", when, err, now)
		}
		if body, err := framework.HTTPGet("http://" + n.IP + ":10248/healthz"); err != nil || body != "ok" {
			t.Errorf("%s: kubelet healthz %q, %v", when, body, err)
		}
	}

	if err := c.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	stopped := true
	defer func() {
		if stopped {
			_ = c.StartAPIServer(ctx)
		}
	}()

	// The outage is logged at the default verbosity.
	waitFor(t, 30*time.Second, `"Cannot reach the apiserver" in the agent's log`, func() bool {
		return strings.Contains(agentLog(), "Cannot reach the apiserver")
	})

	// Not ready after the grace period, naming the error; liveness stays ok.
	var body string
	waitFor(t, outageGrace+30*time.Second, "/readyz 503", func() bool {
		var err error
		body, err = framework.HTTPGet(readyz)
		return err != nil && strings.HasPrefix(body, "apiserver unreachable for ")
	})
	if d := time.Since(stoppedAt); d < outageGrace {
		t.Errorf("/readyz not ready %s after the apiserver stopped, within the grace period of %s", d, outageGrace)
	}
	if !strings.Contains(body, "(since ") || !strings.Contains(body, "connection refused") {
		t.Errorf("/readyz says %q, want when the outage began and the error (connection refused)", body)
	}
	if got, err := framework.HTTPGet(healthz); err != nil || got != "ok" {
		t.Errorf("/healthz during the outage: %q, %v; want ok", got, err)
	}
	wantLogged := "Apiserver unreachable for longer than the grace period"
	waitFor(t, 30*time.Second, wantLogged, func() bool { return strings.Contains(agentLog(), wantLogged) })
	keptKubelet("during the outage")

	if err := c.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	stopped = false
	t.Logf("apiserver away for %s", time.Since(stoppedAt).Round(time.Second))

	// Ready again once the apiserver is back, with one line that says
	// after how long.
	waitFor(t, time.Minute, "/readyz ok", func() bool {
		body, err := framework.HTTPGet(readyz)
		return err == nil && body == "ok"
	})
	waitFor(t, 10*time.Second, `"Apiserver reachable again" in the agent's log`, func() bool {
		return strings.Contains(agentLog(), "Apiserver reachable again")
	})
	if got := strings.Count(agentLog(), "Cannot reach the apiserver"); got > 4 {
		t.Errorf("the agent logged %q %d times in a short outage, want at most 4 (a back-off)", "Cannot reach the apiserver", got)
	}
	keptKubelet("after the outage")
	for _, line := range strings.Split(agentLog(), "\n") {
		if strings.Contains(line, "piserver") {
			t.Logf("agent: %s", line)
		}
	}
}
