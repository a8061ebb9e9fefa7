package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/kubectl-dkc/dkc/pkg/atomicfile"
	"github.com/kubectl-dkc/dkc/pkg/checkpoint"
	"github.com/kubectl-dkc/dkc/pkg/checkpoint/checkpointtest"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// crashKills is how many times TestAgentKill9 kills the agent.
const crashKills = 50

// TestAgentKill9 kills the agent with SIGKILL at a random moment of an
// apply on a real kubelet, crashKills times: before it checkpoints, between
// its store writes and the kubelet's config, during the kubelet's restart,
// during the health gate, during a promotion. After each kill it checks the
// store and the kubelet's config as the dead agent left them, restarts the
// agent on the same directories, waits until the node runs the assignment,
// and checks that the status names what the kubelet's config holds.
//
// Invariants, after every kill:
//   - the store decodes (the record, meta/assigned, meta/last-known-good);
//   - the kubelet's config file holds exactly the local config, the
//     assigned one or the last-known-good one, byte for byte;
//
// and after every recovery:
//   - status active names the config whose bytes the file holds, and it is
//     the assignment, and configz shows it;
//   - no temporary is left, and no checkpoint the record does not name.
func TestAgentKill9(t *testing.T) {
	t.Parallel() // docs/development.md, "Tests in parallel"
	c := framework.Setup(t, framework.Options{Nodes: 1})
	ctx := context.Background()
	n := c.Nodes[0]
	if err := c.ApplyManifest(ctx, filepath.Join("..", "..", "deploy", "rbac.yaml"), false); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := c.UserKubeconfig(framework.AgentIdentity)
	if err != nil {
		t.Fatal(err)
	}
	local, err := os.ReadFile(n.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	payload := func(maxPods int) string { return framework.ConfigWith(t, local, framework.MaxPods(maxPods)) }
	start := func() *framework.Agent {
		t.Helper()
		a, err := n.StartAgent(framework.DKCBinary(), n.AgentArgs(framework.AgentOptions{
			Kubeconfig:    kubeconfig,
			HealthTimeout: 20 * time.Second,
			// Short, so that kills also hit promotions.
			TrialDuration: 2 * time.Second,
		}))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	ag := start()
	rng := rand.New(rand.NewPCG(8, 9))
	began := time.Now()
	var killed, restartedKubelet int

	for i := range crashKills {
		name := fmt.Sprintf("crash-%02d", i)
		maxPods := 50 + i
		createConfigMap(t, c, name, payload(maxPods))
		starts := n.KubeletStarts()
		mustDKC(t, c, "", "assign", n.Name, "--config", name)
		var when string
		if i%2 == 0 {
			// Anywhere from the watch event to after the health gate.
			d := time.Duration(rng.IntN(3500)) * time.Millisecond
			time.Sleep(d)
			when = fmt.Sprintf("%s after the assignment", d)
		} else {
			// Right after the kubelet restart began, before the gate.
			waitFor(t, 30*time.Second, "the agent to restart the kubelet", func() bool { return n.KubeletStarts() > starts })
			time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
			when = "during the kubelet's restart and health gate"
		}
		if err := ag.Kill(); err != nil {
			t.Fatal(err)
		}
		killed++
		if n.KubeletStarts() > starts {
			restartedKubelet++
		}
		point := fmt.Sprintf("kill %d (%s, %s)", i+1, name, when)

		// As the dead agent left them.
		checkAfterKill(t, n, local, point)

		ag = start()
		// Recovered once the health gate has ended: a status that names
		// the config active while the gate waits (the killed agent may
		// have published it) does not count, and GC runs after the gate.
		eventuallyStatus(t, c, n.Name, 90*time.Second, Active(name), NoError())
		checkAfterRecovery(t, c, n, name, maxPods, point)
	}
	t.Logf("kill -9 campaign: %d kills (%d after the kubelet restart began) in %s", killed, restartedKubelet, time.Since(began).Round(time.Second))
	if err := ag.Stop(); err != nil {
		t.Fatal(err)
	}
}

// nodeStatus is the node's reported config status.
func nodeStatus(t *testing.T, c *framework.Cluster, node string) *corev1.NodeConfigStatus {
	t.Helper()
	obj, err := c.Client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	st, _, err := source.Status(obj)
	if err != nil {
		t.Fatalf("status of %s: %v", node, err)
	}
	return st
}

// openStore opens the store in dir after a kill, as the agent's own start
// would (Open removes the temporaries a crash left), and decodes the record,
// and upstream's meta files as a kubelet would. point names the moment in
// a failure.
func openStore(t *testing.T, dir, point string) (*checkpoint.Store, checkpoint.State) {
	t.Helper()
	store, err := checkpoint.Open(dir, clock.RealClock{})
	if err != nil {
		t.Fatalf("%s: open store: %v", point, err)
	}
	st, _, err := store.State()
	if err != nil {
		t.Fatalf("%s: record: %v", point, err)
	}
	if _, err := checkpointtest.Read(dir); err != nil {
		t.Fatalf("%s: the store as a kubelet or an older dkc reads it: %v", point, err)
	}
	return store, st
}

func checkAfterKill(t *testing.T, n *framework.Node, local []byte, point string) {
	t.Helper()
	store, st := openStore(t, n.AgentStoreDir(), point)
	file, err := os.ReadFile(n.ConfigPath)
	if err != nil {
		t.Fatalf("%s: kubelet config: %v", point, err)
	}
	var matches []string
	if bytes.Equal(file, local) {
		matches = append(matches, "local")
	}
	for what, src := range map[string]*corev1.NodeConfigSource{"assigned": st.Assigned, "last-known-good": st.LastKnownGood} {
		if src == nil {
			continue
		}
		data, err := store.LoadKey(src)
		if err != nil {
			t.Fatalf("%s: checkpoint of the %s config %s: %v", point, what, src.ConfigMap.Name, err)
		}
		if bytes.Equal(file, data) {
			matches = append(matches, what+" "+src.ConfigMap.Name)
		}
	}
	if len(matches) == 0 {
		t.Fatalf("%s: the kubelet's config is none of local, assigned, last-known-good:\n%s", point, file)
	}
}

// readRecord reads the record and a checkpoint's key straight from the
// store's files, without opening the store under the running agent.
func readRecord(t *testing.T, n *framework.Node, point string) checkpoint.State {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(n.AgentStoreDir(), "store", "meta", "state"))
	if err != nil {
		t.Fatalf("%s: record: %v", point, err)
	}
	var st checkpoint.State
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatalf("%s: record: %v", point, err)
	}
	return st
}

func checkpointFile(n *framework.Node, src *corev1.NodeConfigSource) string {
	return filepath.Join(n.AgentStoreDir(), "store", "checkpoints", string(src.ConfigMap.UID), src.ConfigMap.ResourceVersion, src.ConfigMap.KubeletConfigKey)
}

func checkAfterRecovery(t *testing.T, c *framework.Cluster, n *framework.Node, name string, maxPods int, point string) {
	t.Helper()
	status := nodeStatus(t, c, n.Name)
	file, err := os.ReadFile(n.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(checkpointFile(n, status.Active))
	if err != nil {
		t.Fatalf("%s: checkpoint of active %s: %v", point, name, err)
	}
	if !bytes.Equal(file, data) {
		t.Fatalf("%s: status names %s as active, the kubelet's config holds:\n%s", point, name, file)
	}
	if got := configz(t, c, n.Name)["maxPods"]; got != float64(maxPods) {
		t.Fatalf("%s: configz maxPods %v, want %d", point, got, maxPods)
	}
	// GC runs right after the sync that reported: allow it a moment.
	var left string
	_ = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		left = leftovers(t, n, readRecord(t, n, point))
		return left == "", nil
	})
	if left != "" {
		t.Fatalf("%s: %s", point, left)
	}
}

// leftovers names a temporary or an unreferenced checkpoint, or is "".
func leftovers(t *testing.T, n *framework.Node, st checkpoint.State) string {
	t.Helper()
	keep := map[string]bool{}
	for _, src := range []*corev1.NodeConfigSource{st.Assigned, st.Active, st.LastKnownGood} {
		if src != nil {
			keep[string(src.ConfigMap.UID)+"/"+src.ConfigMap.ResourceVersion] = true
		}
	}
	store := filepath.Join(n.AgentStoreDir(), "store")
	var left string
	_ = filepath.WalkDir(store, func(p string, d os.DirEntry, err error) error {
		if err != nil || left != "" {
			return nil
		}
		if strings.HasPrefix(d.Name(), atomicfile.TempPrefix) {
			left = "temporary left: " + p
		}
		if d.IsDir() && filepath.Dir(filepath.Dir(p)) == filepath.Join(store, "checkpoints") && !keep[filepath.Base(filepath.Dir(p))+"/"+d.Name()] {
			left = "checkpoint left that the record does not name: " + p
		}
		return nil
	})
	for _, dir := range []string{filepath.Dir(n.ConfigPath), n.ConfigDir} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), atomicfile.TempPrefix) {
				left = "temporary left: " + filepath.Join(dir, e.Name())
			}
		}
	}
	return left
}
