package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/pkg/checkpoint"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// TestFaults injects faults into real components while the dkc agent applies
// a config, and checks each time that the kubelet is left healthy and nothing
// is lost (faultEnv.wantHealthy):
//
//   - two agents for one node: the second exits non-zero and names the PID
//     that holds the store's lock;
//   - the assignment changed A → B → A while B is applied: A ends active;
//   - the ConfigMap deleted while it is applied: the kubelet runs it from its
//     checkpoint, and status says the ConfigMap is gone;
//   - the apiserver stopped between the kubelet's restart and the health
//     gate, for longer than --health-timeout: no rollback, and status
//     converges once the apiserver is back;
//   - the store on a full filesystem: a clear error, the kubelet untouched,
//     convergence once there is space;
//   - a read-only kubelet config directory: a clear error, the kubelet
//     untouched, convergence once it is writable.
//
// Node 1 takes the first four, node 2 the full filesystem, node 3 the
// read-only directory. The filesystem faults are mounts in the agent's own
// mount namespace only.
func TestFaults(t *testing.T) {
	t.Parallel() // docs/development.md, "Tests in parallel"
	c := framework.Setup(t, framework.Options{Nodes: 3})
	ctx := context.Background()
	if err := c.ApplyManifest(ctx, filepath.Join("..", "..", "deploy", "rbac.yaml"), false); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := c.UserKubeconfig(framework.AgentIdentity)
	if err != nil {
		t.Fatal(err)
	}
	f := &faultEnv{c: c, kubeconfig: kubeconfig, payloads: map[string]string{}, maxPods: map[string]int{}}
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]

	gate, err := n1.NewRestartGate()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gate.Release() })
	n1Args := f.agentArgs(n1, "--restart-command", gate.Command)
	ag1 := f.startAgent(t, n1, n1Args)
	// faults-a is where the subtests on n1 start from.
	f.createConfig(t, n1, "faults-a", 61, 0)

	t.Run("two agents for one node: the second refuses and says why", func(t *testing.T) {
		mustDKC(t, c, "", "assign", n1.Name, "--config", "faults-a")
		eventuallyStatus(t, c, n1.Name, time.Minute, Active("faults-a"), LKG("faults-a"), NoError())
		pid, kubeletPID, starts := ag1.PID(), n1.KubeletPID(), n1.KubeletStarts()

		// Other ports, so that only the store's lock can stop it.
		args := append(append([]string{}, n1Args...), "--metrics-bind-address", "0", "--health-bind-address", "0")
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		cmd := n1.Command(framework.DKCBinary(), args...)
		second := exec.CommandContext(tctx, cmd.Args[0], cmd.Args[1:]...)
		out, err := second.CombinedOutput()
		t.Logf("second agent: %v\n%s", err, out)
		if tctx.Err() != nil {
			t.Fatalf("the second agent ran for 30s; it must refuse to run")
		}
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
			t.Errorf("second agent: %v, want exit status 1", err)
		}
		storeDir := n1.AgentStoreDir()
		want := fmt.Sprintf("error: checkpoint store %s is in use: the process with PID %d holds the lock %s; run one agent per node and stop the other one first",
			storeDir, pid, filepath.Join(storeDir, checkpoint.LockFileName))
		if !strings.Contains(string(out), want) {
			t.Errorf("second agent's output lacks\n%s", want)
		}
		if ag1.PID() != pid {
			t.Errorf("first agent PID %d, want %d still running", ag1.PID(), pid)
		}
		if n1.KubeletPID() != kubeletPID || n1.KubeletStarts() != starts {
			t.Errorf("kubelet restarted (PID %d -> %d)", kubeletPID, n1.KubeletPID())
		}
		f.wantHealthy(t, n1, n1.AgentStoreDir(), "faults-a", "faults-a")

		// A killed agent leaves its lock file, not its lock.
		if err := ag1.Kill(); err != nil {
			t.Fatal(err)
		}
		ag1 = f.startAgent(t, n1, n1Args)
		waitFor(t, 30*time.Second, "the new agent's /healthz", func() bool {
			body, err := framework.HTTPGet("http://" + n1.IP + ":10391/healthz")
			return err == nil && body == "ok"
		})
		lock, err := os.ReadFile(filepath.Join(storeDir, checkpoint.LockFileName))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(lock)); got != strconv.Itoa(ag1.PID()) {
			t.Errorf("lock file holds PID %q, want the new agent's %d", got, ag1.PID())
		}
	})

	t.Run("assignment changed A to B to A during an apply", func(t *testing.T) {
		mustDKC(t, c, "", "assign", n1.Name, "--config", "faults-a")
		eventuallyStatus(t, c, n1.Name, time.Minute, Active("faults-a"), LKG("faults-a"), NoError())
		f.createConfig(t, n1, "faults-b", 62, 0)
		starts := n1.KubeletStarts()
		mark := f.historyMark(t, n1.Name)
		f.holdNextRestart(t, gate, n1, "faults-b")
		mustDKC(t, c, "", "assign", n1.Name, "--config", "faults-a")
		f.release(t, gate)

		// The status from before faults-b already reads "faults-a": first
		// wait for the kubelet's restart back to faults-a.
		waitFor(t, time.Minute, "the kubelet's restart back to faults-a", func() bool { return n1.KubeletStarts()-starts >= 2 })
		// faults-a ends last-known-good: at once when faults-b was still
		// in its trial, or after faults-a's own 5 s trial when faults-b's
		// apply outlasted its trial (a restart that met the kubelet's PLEG
		// wait, about 10 s) and faults-b was promoted first.
		eventuallyStatus(t, c, n1.Name, time.Minute, Assigned("faults-a"), Active("faults-a"), LKG("faults-a"), NoError())
		f.wantHistorySince(t, n1.Name, mark, []string{"faults-b", "faults-a"})
		consistentlyNoRestart(t, "the return to faults-a", 3*time.Second, n1.KubeletPID, n1.KubeletStarts)
		// B, then A again: no rollback, no third restart.
		if got := n1.KubeletStarts() - starts; got != 2 {
			t.Errorf("kubelet started %d times, want 2 (faults-b, then faults-a)", got)
		}
		wantCondition(t, c, n1.Name, "True", "Applied")
		f.wantHealthy(t, n1, n1.AgentStoreDir(), "faults-a", "faults-a")
	})

	t.Run("ConfigMap deleted during its apply: the kubelet runs it from the checkpoint", func(t *testing.T) {
		f.createConfig(t, n1, "faults-c", 63, 0)
		starts := n1.KubeletStarts()
		f.holdNextRestart(t, gate, n1, "faults-c")
		if err := c.Client.CoreV1().ConfigMaps("kube-system").Delete(ctx, "faults-c", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		f.release(t, gate)

		// The kubelet passed the gate on faults-c, which stays active from
		// its checkpoint; status says that the assigned ConfigMap is gone.
		const want = "failed to sync: failed to download config, see Kubelet log for details: configmap kube-system/faults-c not found"
		st := eventuallyStatus(t, c, n1.Name, time.Minute, AnyError())
		if st.Error != want {
			t.Errorf("status.error = %q, want %q", st.Error, want)
		}
		if !framework.IsConfigMap(st.Assigned, "faults-c") || !framework.IsConfigMap(st.Active, "faults-c") {
			t.Errorf("assigned %v, active %v; want faults-c for both: the kubelet runs it", st.Assigned, st.Active)
		}
		consistentlyNoRestart(t, "the download error for faults-c", 3*time.Second, n1.KubeletPID, n1.KubeletStarts)
		if got := n1.KubeletStarts() - starts; got != 1 {
			t.Errorf("kubelet started %d times, want 1: faults-c, no rollback", got)
		}
		wantCondition(t, c, n1.Name, "False", "Failed")
		f.wantHealthy(t, n1, n1.AgentStoreDir(), "faults-c", "faults-c")

		// Not stuck: the next assignment converges.
		mustDKC(t, c, "", "assign", n1.Name, "--config", "faults-a")
		// wantHealthy copies the store: wait for the trial's end, so
		// that no promotion or GC runs under the copy.
		eventuallyStatus(t, c, n1.Name, time.Minute, Active("faults-a"), LKG("faults-a"), NoError())
		f.wantHealthy(t, n1, n1.AgentStoreDir(), "faults-a", "faults-a")
	})

	t.Run("store on a full filesystem", func(t *testing.T) {
		storeDir := n2.AgentStoreDir()
		if err := os.MkdirAll(storeDir, 0o700); err != nil {
			t.Fatal(err)
		}
		ag := f.startAgentInMountNS(t, n2, f.agentArgs(n2), framework.TmpfsMount(storeDir, "64k"))
		defer ag.Stop()
		view := func() string {
			p, err := ag.Path(storeDir)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		f.createConfig(t, n2, "faults-fs-a", 71, 0)
		mustDKC(t, c, "", "assign", n2.Name, "--config", "faults-fs-a")
		eventuallyStatus(t, c, n2.Name, time.Minute, Active("faults-fs-a"), LKG("faults-fs-a"), NoError())
		f.wantHealthy(t, n2, view(), "faults-fs-a", "faults-fs-a")

		// 128 KiB of comments: more than the 64 KiB tmpfs holds.
		f.createConfig(t, n2, "faults-fs-big", 72, 128<<10)
		pid, starts := n2.KubeletPID(), n2.KubeletStarts()
		mustDKC(t, c, "", "assign", n2.Name, "--config", "faults-fs-big")
		st := eventuallyStatus(t, c, n2.Name, 30*time.Second, AnyError())
		if !strings.Contains(st.Error, "no space left on device") {
			t.Errorf("status.error = %q, want it to say %q", st.Error, "no space left on device")
		}
		if !framework.IsConfigMap(st.Assigned, "faults-fs-big") || !framework.IsConfigMap(st.Active, "faults-fs-a") {
			t.Errorf("assigned %v, active %v; want faults-fs-big assigned, faults-fs-a active", st.Assigned, st.Active)
		}
		consistentlyNoRestart(t, "the full store's error", 3*time.Second, n2.KubeletPID, n2.KubeletStarts)
		if n2.KubeletPID() != pid || n2.KubeletStarts() != starts {
			t.Errorf("kubelet restarted (PID %d -> %d)", pid, n2.KubeletPID())
		}
		f.wantHealthy(t, n2, view(), "faults-fs-big", "faults-fs-a")

		// Space again: the agent's retries converge.
		if err := ag.InMountNS("mount -n -o remount,size=4m " + storeDir); err != nil {
			t.Fatal(err)
		}
		// wantHealthy copies the store: wait for the trial's end, so
		// that no promotion or GC runs under the copy.
		eventuallyStatus(t, c, n2.Name, 2*time.Minute, Active("faults-fs-big"), LKG("faults-fs-big"), NoError())
		f.wantHealthy(t, n2, view(), "faults-fs-big", "faults-fs-big")
	})

	t.Run("read-only kubelet config directory", func(t *testing.T) {
		storeDir := n3.AgentStoreDir()
		ag := f.startAgent(t, n3, f.agentArgs(n3))
		f.createConfig(t, n3, "faults-ro-a", 81, 0)
		mustDKC(t, c, "", "assign", n3.Name, "--config", "faults-ro-a")
		eventuallyStatus(t, c, n3.Name, time.Minute, Active("faults-ro-a"), LKG("faults-ro-a"), NoError())
		// The directory of --kubelet-config read-only for the running agent
		// (its mount namespace is private); its store, a subdirectory, stays
		// writable. An agent started on a read-only directory exits at
		// once: its startup rewrites the kubelet's config.
		configDir := filepath.Dir(n3.ConfigPath)
		if err := ag.InMountNS(framework.ReadOnlyMount(configDir, storeDir)); err != nil {
			t.Fatal(err)
		}
		defer ag.Stop()

		f.createConfig(t, n3, "faults-ro-b", 82, 0)
		pid, starts := n3.KubeletPID(), n3.KubeletStarts()
		mustDKC(t, c, "", "assign", n3.Name, "--config", "faults-ro-b")
		st := eventuallyStatus(t, c, n3.Name, 30*time.Second, AnyError())
		if !strings.Contains(st.Error, "read-only file system") || !strings.Contains(st.Error, configDir) {
			t.Errorf("status.error = %q, want it to name %s and say %q", st.Error, configDir, "read-only file system")
		}
		// The kubelet never left faults-ro-a: no health gate ran, nothing
		// was rolled back, and the last-known-good config did not fail.
		for _, wrong := range []string{"health gate", "rolled back", "failed too"} {
			if strings.Contains(st.Error, wrong) {
				t.Errorf("status.error says %q, but the kubelet was never restarted: %q", wrong, st.Error)
			}
		}
		if strings.Contains(st.Error, "rolled back") {
			t.Log("A config that cannot be written is a fault of the node, not of the config: the agent should report it, " +
				"keep the kubelet and the store's active config, and retry with backoff, as for a full store. " +
				"Here pkg/agent apply → activate returned the write error and apply called rollback, which reports a " +
				"health-gate failure, 'rolled back', and 'the last-known-good config failed too' (its write fails the same way), " +
				"and records the error against the assignment, so the agent does not retry once the directory is writable.")
		}
		if !framework.IsConfigMap(st.Assigned, "faults-ro-b") || !framework.IsConfigMap(st.Active, "faults-ro-a") || !framework.IsConfigMap(st.LastKnownGood, "faults-ro-a") {
			t.Errorf("assigned %v, active %v, lastKnownGood %v; want faults-ro-b, faults-ro-a, faults-ro-a", st.Assigned, st.Active, st.LastKnownGood)
		}
		consistentlyNoRestart(t, "the read-only directory's error", 3*time.Second, n3.KubeletPID, n3.KubeletStarts)
		if n3.KubeletPID() != pid || n3.KubeletStarts() != starts {
			t.Errorf("kubelet restarted (PID %d -> %d)", pid, n3.KubeletPID())
		}
		f.wantHealthy(t, n3, storeDir, "faults-ro-b", "faults-ro-a")

		// Writable again: a fault of the node, not of the config, so the
		// agent retries and converges.
		if err := ag.InMountNS("mount -n -o remount,bind,rw " + configDir); err != nil {
			t.Fatal(err)
		}
		// wantHealthy copies the store: wait for the trial's end, so
		// that no promotion or GC runs under the copy.
		eventuallyStatus(t, c, n3.Name, time.Minute, Active("faults-ro-b"), LKG("faults-ro-b"), NoError())
		f.wantHealthy(t, n3, storeDir, "faults-ro-b", "faults-ro-b")
	})

	// Last: every other test needs the apiserver.
	t.Run("apiserver stopped during an apply: no rollback, convergence when it is back", func(t *testing.T) {
		f.createConfig(t, n1, "faults-d", 64, 0)
		starts := n1.KubeletStarts()
		f.holdNextRestart(t, gate, n1, "faults-d")
		// The agent waits between the kubelet's restart and its health
		// gate: stop the apiserver there, as a control-plane upgrade would.
		if err := c.StopAPIServer(); err != nil {
			t.Fatal(err)
		}
		stopped := true
		defer func() {
			if stopped {
				_ = c.StartAPIServer(ctx)
			}
		}()
		f.release(t, gate)
		// Away longer than --health-timeout, so that a gate that needs the
		// apiserver times out.
		outage := faultHealthTimeout + 10*time.Second
		consistently(t, outage, "one kubelet start while the apiserver is away", func() bool { return n1.KubeletStarts()-starts == 1 })
		if got := n1.KubeletStarts() - starts; got != 1 {
			t.Errorf("kubelet started %d times while the apiserver was away, want 1: faults-d, no rollback", got)
			t.Logf("A kubelet whose own checks pass must not be rolled back because the apiserver does not answer. "+
				"The agent rolled back; its log says why: %s", rollbackLogLine(n1))
		}
		if body, err := framework.HTTPGet("http://" + n1.IP + ":10248/healthz"); err != nil || body != "ok" {
			t.Errorf("kubelet healthz while the apiserver is away: %q, %v", body, err)
		}
		if got := f.readFile(t, n1.ConfigPath); got != f.payloads["faults-d"] {
			t.Errorf("kubelet config while the apiserver is away is not faults-d's:\n%s", got)
		}
		began := time.Now()
		if err := c.StartAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		stopped = false
		t.Logf("apiserver away for %s, ready again after %s", outage, time.Since(began).Round(time.Millisecond))

		eventuallyStatus(t, c, n1.Name, 2*time.Minute, Assigned("faults-d"), Active("faults-d"), NoError())
		t.Logf("status converged %s after the apiserver was back", time.Since(began).Round(time.Millisecond))
		if got := n1.KubeletStarts() - starts; got != 1 {
			t.Errorf("kubelet started %d times, want 1: faults-d, no rollback", got)
		}
		f.wantHealthy(t, n1, n1.AgentStoreDir(), "faults-d", "faults-d")
	})
}

// rollbackLogLine is the agent's last "Rolling back" log line on n, or "".
func rollbackLogLine(n *framework.Node) string {
	b, _ := os.ReadFile(filepath.Join(n.Dir, "agent.log"))
	lines := strings.Split(string(b), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "Rolling back") {
			return lines[i]
		}
	}
	return ""
}

// faultHealthTimeout is the agents' --health-timeout in TestFaults: well
// over a kubelet restart that meets its PLEG wait (about 10 s here), so that
// a slow machine does not roll a good config back.
const faultHealthTimeout = 25 * time.Second

// faultEnv is what TestFaults's subtests share: the configs they created,
// by ConfigMap name.
type faultEnv struct {
	c          *framework.Cluster
	kubeconfig string
	payloads   map[string]string
	maxPods    map[string]int
}

func (f *faultEnv) agentArgs(n *framework.Node, extra ...string) []string {
	return n.AgentArgs(framework.AgentOptions{
		Kubeconfig:    f.kubeconfig,
		HealthTimeout: faultHealthTimeout,
		TrialDuration: 5 * time.Second,
		Extra:         append([]string{"-v=2"}, extra...),
	})
}

func (f *faultEnv) startAgent(t *testing.T, n *framework.Node, args []string) *framework.Agent {
	t.Helper()
	a, err := n.StartAgent(framework.DKCBinary(), args)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (f *faultEnv) startAgentInMountNS(t *testing.T, n *framework.Node, args []string, setup ...string) *framework.Agent {
	t.Helper()
	a, err := n.StartAgentInMountNS(framework.DKCBinary(), args, setup...)
	if err != nil {
		t.Fatal(err)
	}
	// The setup's mounts are in place before the agent runs; a failed one
	// ends it.
	waitFor(t, 30*time.Second, "the agent's /healthz on "+n.Name, func() bool {
		if a.PID() == 0 {
			t.Fatalf("agent on %s exited; see %s:\n%s", n.Name, a.LogPath, f.readFile(t, a.LogPath))
		}
		body, err := framework.HTTPGet("http://" + n.IP + ":10391/healthz")
		return err == nil && body == "ok"
	})
	return a
}

// createConfig creates the ConfigMap name in kube-system with n's default
// kubelet config, maxPods set, and padding bytes of YAML comments.
func (f *faultEnv) createConfig(t *testing.T, n *framework.Node, name string, maxPods, padding int) {
	t.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal(n.DefaultKubeletConfig(), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["maxPods"] = maxPods
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	line := "# " + strings.Repeat("x", 77) + "\n"
	for len(out) < padding {
		out = append(out, line...)
	}
	createConfigMap(t, f.c, name, string(out))
	f.payloads[name], f.maxPods[name] = string(out), maxPods
}

// holdNextRestart assigns name to n and waits until the agent restarted the
// kubelet on it and waits, held by gate, before its health gate.
func (f *faultEnv) holdNextRestart(t *testing.T, gate *framework.RestartGate, n *framework.Node, name string) {
	t.Helper()
	if err := gate.Hold(); err != nil {
		t.Fatal(err)
	}
	mustDKC(t, f.c, "", "assign", n.Name, "--config", name)
	if err := gate.WaitPaused(context.Background(), time.Minute); err != nil {
		_ = gate.Release()
		t.Fatalf("the agent did not restart the kubelet for %s: %v", name, err)
	}
	if got := f.readFile(t, n.ConfigPath); got != f.payloads[name] {
		t.Errorf("kubelet config during the held restart is not %s's:\n%s", name, got)
	}
}

func (f *faultEnv) release(t *testing.T, gate *framework.RestartGate) {
	t.Helper()
	if err := gate.Release(); err != nil {
		t.Fatal(err)
	}
}

func (f *faultEnv) readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wantHealthy checks that n's kubelet is healthy and nothing is lost: its
// healthz says ok; status names assigned and active, and active's
// checkpoint holds exactly the bytes of the kubelet's config file, whose
// maxPods configz reports; the store at storeDir (as the agent sees it)
// decodes, every checkpoint it names loads, and no temporary file is left.
func (f *faultEnv) wantHealthy(t *testing.T, n *framework.Node, storeDir, assigned, active string) {
	t.Helper()
	if body, err := framework.HTTPGet("http://" + n.IP + ":10248/healthz"); err != nil || body != "ok" {
		t.Errorf("kubelet healthz on %s: %q, %v", n.Name, body, err)
	}
	st := eventuallyStatus(t, f.c, n.Name, 10*time.Second, AnyStatus())
	if !framework.IsConfigMap(st.Assigned, assigned) || !framework.IsConfigMap(st.Active, active) {
		t.Errorf("status of %s: assigned %v, active %v; want %s, %s", n.Name, st.Assigned, st.Active, assigned, active)
	}
	onDisk := f.readFile(t, n.ConfigPath)
	if onDisk != f.payloads[active] {
		t.Errorf("kubelet config of %s is not %s's:\n%.2000s", n.Name, active, onDisk)
	}
	if got := configz(t, f.c, n.Name)["maxPods"]; got != float64(f.maxPods[active]) {
		t.Errorf("configz maxPods %v on %s, want %d (%s)", got, n.Name, f.maxPods[active], active)
	}

	// A copy: Open cleans temporaries, which must not race the agent.
	cp := filepath.Join(t.TempDir(), "dkc")
	if out, err := exec.Command("cp", "-a", storeDir, cp).CombinedOutput(); err != nil {
		t.Fatalf("copy the store: %v: %s", err, out)
	}
	_ = os.Remove(filepath.Join(cp, checkpoint.LockFileName))
	err := filepath.WalkDir(cp, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".dkc-tmp-") {
			t.Errorf("store of %s holds a leftover temporary: %s", n.Name, strings.TrimPrefix(path, cp))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	store, err := checkpoint.Open(cp, clock.RealClock{})
	if err != nil {
		t.Fatalf("store of %s does not open: %v", n.Name, err)
	}
	rec, _, err := store.State()
	if err != nil {
		t.Fatalf("store of %s: the agent's record does not decode: %v", n.Name, err)
	}
	for what, src := range map[string]*corev1.NodeConfigSource{"assigned": rec.Assigned, "active": rec.Active, "last-known-good": rec.LastKnownGood} {
		if src == nil {
			continue
		}
		if _, err := store.LoadKey(src); err != nil {
			t.Errorf("store of %s: checkpoint of the recorded %s %s: %v", n.Name, what, src.ConfigMap.Name, err)
		}
	}
	if !framework.IsConfigMap(rec.Active, active) {
		t.Errorf("store of %s records active %v, want %s", n.Name, rec.Active, active)
	}
	if st.Active != nil && st.Active.ConfigMap != nil {
		payload, err := store.LoadKey(st.Active)
		if err != nil {
			t.Errorf("store of %s: checkpoint of the active %s: %v", n.Name, st.Active.ConfigMap.Name, err)
		} else if string(payload) != onDisk {
			t.Errorf("store of %s: the checkpoint of the active %s differs from the kubelet's config file", n.Name, st.Active.ConfigMap.Name)
		}
	}
}

// historyMark is node's newest history entry now (nil: none), for
// wantHistorySince. History times have whole seconds, so a time cannot tell
// an entry written just before an action from one written just after it;
// the entries after the mark can.
func (f *faultEnv) historyMark(t *testing.T, node string) *source.HistoryEntry {
	t.Helper()
	h, err := source.History(readNode(t, f.c.Client, node))
	if err != nil {
		t.Fatalf("history of %s does not decode: %v", node, err)
	}
	if len(h) == 0 {
		return nil
	}
	return &h[len(h)-1]
}

// wantHistorySince waits up to a minute until node's history entries after
// mark (all of them when mark is nil or has rotated out) are names, each
// Applied, in order.
func (f *faultEnv) wantHistorySince(t *testing.T, node string, mark *source.HistoryEntry, names []string) {
	t.Helper()
	var want []string
	for _, name := range names {
		want = append(want, name+" "+source.ResultApplied)
	}
	var got []string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		h, err := source.History(readNode(t, f.c.Client, node))
		if err != nil {
			return false, fmt.Errorf("history of %s does not decode: %w", node, err)
		}
		if h == nil {
			t.Logf("%s has no %s annotation; the agent does not write one", node, source.HistoryAnnotation)
			got = want
			return true, nil
		}
		start := 0
		for i := range h {
			if i > 0 && h[i].Time.Before(&h[i-1].Time) {
				return false, fmt.Errorf("history of %s goes back in time at entry %d: %+v", node, i, h)
			}
			if mark != nil && apiequality.Semantic.DeepEqual(h[i], *mark) {
				start = i + 1
			}
		}
		got = got[:0]
		for _, e := range h[start:] {
			name := "local"
			if e.Source != nil && e.Source.ConfigMap != nil {
				name = e.Source.ConfigMap.Name
			}
			got = append(got, name+" "+e.Result)
		}
		return slices.Equal(got, want), nil
	})
	switch {
	case wait.Interrupted(err):
		t.Errorf("history of %s since the mark: %v, want %v", node, got, want)
	case err != nil:
		t.Error(err)
	default:
		t.Logf("history of %s since the mark: %v", node, got)
	}
}
