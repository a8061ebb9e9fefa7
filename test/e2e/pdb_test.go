package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// TestDrainsHonourPodDisruptionBudgets runs rollouts that drain every node
// under a real kube-controller-manager (its disruption controller computes
// the budgets' status) and kube-scheduler. The Deployment web has one pod
// per node (required anti-affinity), and the PodDisruptionBudget web allows
// one of them unavailable: an evicted pod's replacement waits for its node
// to be uncordoned. The CLI's rollout may take every node at once
// (--max-unavailable 3): after the canary the budget alone keeps the two
// other nodes' drains apart, the second waiting until the first is back
// and uncordoned and its pod Ready again. A watch of the pods holds, over the whole test,
// that never more than one was unavailable. The rollouts: one from the CLI
// (rollout start --drain --wait); one whose drain the budget blocks for
// good (maxUnavailable 0), which names the budget and the pod while it
// waits and halts at --drain-timeout with the node uncordoned and on its
// previous config; and one from the controller, for a pool that drains.
func TestDrainsHonourPodDisruptionBudgets(t *testing.T) {
	t.Parallel() // docs/development.md, "Tests in parallel"
	c, names := rolloutClusterWith(t, framework.Options{Nodes: 3, Pods: true}, nil)
	ctx := context.Background()
	store := rolloutStore(t, c)
	logWorkloads(t, c)
	if err := c.ApplyManifest(ctx, filepath.Join("..", "..", "deploy", "controller.yaml"), false); err != nil {
		t.Fatal(err)
	}
	pause, _ := probeImages(t, filepath.Join("..", ".."))
	if _, err := c.PushImages(ctx, filepath.Join("..", ".."), pause); err != nil {
		t.Fatal(err)
	}
	createSpreadDeployment(t, c, "web", int32(len(names)), c.PauseImage(), nil)
	setBudget(t, c, "web", 1)
	waitBudget(t, c, "web", int32(len(names)), 1)
	available := watchAvailable(t, c, "app=web")
	wantNoneBelow := func(t *testing.T, least int) {
		t.Helper()
		if got := available.least(); got < least {
			t.Errorf("at one time only %d pods of web were available, want at least %d: the budget was violated; the pods:\n%s", got, least, available)
		} else {
			t.Logf("the pods of web, at least %d available:\n%s", got, available)
		}
	}

	// wantDone: every node runs topologyManagerPolicy policy (the
	// ConfigMap pdb-POLICY), uncordoned, and the budget held.
	wantDone := func(t *testing.T, policy string) {
		t.Helper()
		for _, n := range names {
			eventuallyStatus(t, c, n, 30*time.Second, Active("pdb-"+policy), NoError())
			if got := configz(t, c, n)["topologyManagerPolicy"]; got != policy {
				t.Errorf("node %s: configz topologyManagerPolicy %v, want %s", n, got, policy)
			}
			if readNode(t, c.Client, n).Spec.Unschedulable {
				t.Errorf("node %s still cordoned", n)
			}
		}
		wantNoneBelow(t, len(names)-1)
	}
	partial := func(policy string) string {
		return "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\ntopologyManagerPolicy: " + policy + "\n"
	}
	createConfigMap(t, c, "pdb-best-effort", partial("best-effort"))
	createConfigMap(t, c, "pdb-restricted", partial("restricted"))

	t.Run("from the CLI, every node drained and the budget held", func(t *testing.T) {
		mustDKC(t, c, "", "rollout", "start", "--config", "pdb-best-effort", "--all", "--name", "pdb-cli", "--max-unavailable", "3",
			"--drain", "--allow-unsafe=resource-managers", "--drain-timeout", "3m", "--wait", "--timeout", "10m")
		wantDone(t, "best-effort")
	})

	t.Run("a drain the budget blocks names the budget and the pod, and halts at --drain-timeout with the node as it was", func(t *testing.T) {
		n := names[0]
		// Where the CLI's rollout left it (an assign by hand could not
		// allow the resource-managers change).
		eventuallyStatus(t, c, n, time.Minute, Active("pdb-best-effort"), NoError())
		waitBudget(t, c, "web", int32(len(names)), 1)
		setBudget(t, c, "web", 0)
		waitBudget(t, c, "web", int32(len(names)), 0)
		t.Cleanup(func() { setBudget(t, c, "web", 1) })
		starts := c.Node(n).KubeletStarts()

		done := make(chan result, 1)
		go func() {
			done <- dkc(t, c, "", "rollout", "start", "--config", "pdb-restricted", n, "--name", "pdb-blocked",
				"--drain", "--allow-unsafe=resource-managers", "--drain-timeout", "20s", "--wait", "--timeout", "3m")
		}()
		blocked := "node/" + n + ": draining: eviction of pod default/web-"
		var reason string
		waitFor(t, time.Minute, "the rollout's reason to name the blocked eviction", func() bool {
			r, err := store.Get(ctx, "pdb-blocked")
			if err != nil {
				return false
			}
			reason = r.Status.Reason
			return strings.HasPrefix(reason, blocked) && strings.HasSuffix(reason, " blocked by PodDisruptionBudget default/web")
		})
		t.Logf("while blocked: reason %q", reason)
		r := <-done
		if r.ExitCode != 2 {
			t.Errorf("rollout start --wait of a blocked drain: exit %d, want 2 (halted)", r.ExitCode)
		}
		ro := rolloutObject(t, c, "pdb-blocked")
		if ro.Status.State != rollout.Halted || !strings.Contains(ro.Status.Reason, "blocked by PodDisruptionBudget default/web") ||
			!strings.Contains(ro.Status.Reason, "global timeout reached: 20s") {
			t.Errorf("rollout %s, reason %q; want Halted at the drain timeout, naming the budget", ro.Status.State, ro.Status.Reason)
		}
		if readNode(t, c.Client, n).Spec.Unschedulable {
			t.Errorf("node %s still cordoned after its drain timed out", n)
		}
		eventuallyStatus(t, c, n, 10*time.Second, Assigned("pdb-best-effort"), Active("pdb-best-effort"), NoError())
		if got := c.Node(n).KubeletStarts(); got != starts {
			t.Errorf("node %s: %d kubelet starts, want %d: a node whose drain failed must not restart", n, got, starts)
		}
		wantNoneBelow(t, len(names)-1)
	})

	t.Run("from the controller, for a pool that drains, every node drained and the budget held", func(t *testing.T) {
		waitBudget(t, c, "web", int32(len(names)), 1)
		if _, err := c.StartController(framework.DKCBinary(), userKubeconfig(t, c, framework.ControllerIdentity), "ctl"); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			patch := `{"metadata":{"labels":{"pool":"pdb"}}}`
			if _, err := c.Client.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		kubectl(t, c, `apiVersion: kubectl-dkc.io/v1alpha1
kind: NodeConfigPool
metadata:
  name: pdb
  namespace: kube-system
spec:
  nodeSelector:
    matchLabels:
      pool: pdb
  configSource:
    configMap: {namespace: kube-system, name: pdb-restricted, kubeletConfigKey: kubelet}
  allowUnsafe: [resource-managers]
  strategy:
    maxUnavailable: 1
    drain: true
`, "apply", "--server-side", "-f", "-")
		kubectl(t, c, "", "wait", "-n", "kube-system", "--for=condition=Ready", "ncp/pdb", "--timeout=10m")
		wantDone(t, "restricted")
	})
}

// TestRestartWaitsForPodDisruptionBudgets runs a rollout over a node whose
// kubelet is v1.34, which takes its probed pods out of their Services when
// it restarts: the node is assigned only once the budget of its probed pod
// allows a disruption, the rollout's reason says what it waits for
// meanwhile, and a budget that allows none for the drain timeout halts the
// rollout with the node unassigned and its kubelet not restarted.
func TestRestartWaitsForPodDisruptionBudgets(t *testing.T) {
	t.Parallel() // docs/development.md, "Tests in parallel"
	c, names := rolloutClusterWith(t, framework.Options{Nodes: 1, Pods: true, KubeletBinDir: oldKubeletDir(t)}, nil)
	ctx := context.Background()
	store := rolloutStore(t, c)
	logWorkloads(t, c)
	n := names[0]
	if v := readNode(t, c.Client, n).Status.NodeInfo.KubeletVersion; !strings.HasPrefix(v, "v1.34.") {
		t.Fatalf("node %s runs kubelet %s, want v1.34", n, v)
	}
	pause, probe := probeImages(t, filepath.Join("..", ".."))
	refs, err := c.PushImages(ctx, filepath.Join("..", ".."), pause, probe)
	if err != nil {
		t.Fatal(err)
	}
	const port = 18183
	createSpreadDeployment(t, c, "probed", 1, refs[1], func(spec *corev1.PodSpec) {
		spec.Containers[0].Args = []string{"-listen", fmt.Sprintf(":%d", port)}
		spec.Containers[0].ReadinessProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(port)}},
			PeriodSeconds: 2,
		}
	})
	// minAvailable 1 of 1: no disruption allowed.
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "probed", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "probed"}},
		},
	}
	if _, err := c.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBudget(t, c, "probed", 1, 0)
	setMinAvailable := func(t *testing.T, min int32) {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"minAvailable":%d}}`, min)
		if _, err := c.Client.PolicyV1().PodDisruptionBudgets("default").Patch(ctx, "probed", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createConfigMap(t, c, "pdbwait-a", maxPodsConfig(71))
	createConfigMap(t, c, "pdbwait-b", maxPodsConfig(72))

	t.Run("the node waits for the budget, says so, and restarts once it allows a disruption", func(t *testing.T) {
		starts := c.Node(n).KubeletStarts()
		done := make(chan result, 1)
		go func() {
			done <- dkc(t, c, "", "rollout", "start", "--config", "pdbwait-a", "--all", "--name", "pdbwait-a", "--drain-timeout", "3m", "--wait", "--timeout", "5m")
		}()
		want := "node/" + n + ": waiting for PodDisruptionBudget default/probed (pod default/probed-"
		waitFor(t, time.Minute, "the rollout's reason to name the budget it waits for", func() bool {
			r, err := store.Get(ctx, "pdbwait-a")
			return err == nil && strings.HasPrefix(r.Status.Reason, want) && strings.HasSuffix(r.Status.Reason, ") before restarting the kubelet")
		})
		consistently(t, 5*time.Second, "node "+n+" unassigned while its budget allows nothing", func() bool {
			src, _, err := source.Assigned(readNode(t, c.Client, n))
			return err == nil && src == nil
		})
		if got := c.Node(n).KubeletStarts(); got != starts {
			t.Fatalf("node %s: %d kubelet starts while waiting for its budget, want %d", n, got, starts)
		}
		setMinAvailable(t, 0)
		if r := <-done; r.ExitCode != 0 {
			t.Fatalf("rollout start --wait: exit %d, want 0 once the budget allows the restart", r.ExitCode)
		}
		eventuallyStatus(t, c, n, 30*time.Second, Active("pdbwait-a"), NoError())
		if ro := rolloutObject(t, c, "pdbwait-a"); ro.Status.Reason != "" {
			t.Errorf("reason %q after the rollout, want none", ro.Status.Reason)
		}
	})

	t.Run("a budget that allows nothing for the drain timeout halts the rollout, the node as it was", func(t *testing.T) {
		startFrom(t, c, n, "pdbwait-a", 3*time.Minute)
		setMinAvailable(t, 1)
		waitBudget(t, c, "probed", 1, 0)
		starts := c.Node(n).KubeletStarts()
		r := dkc(t, c, "", "rollout", "start", "--config", "pdbwait-b", "--all", "--name", "pdbwait-b", "--drain-timeout", "20s", "--wait", "--timeout", "3m")
		if r.ExitCode != 2 {
			t.Errorf("rollout start --wait: exit %d, want 2 (halted)", r.ExitCode)
		}
		ro := rolloutObject(t, c, "pdbwait-b")
		want := "node/" + n + ": wait for PodDisruptionBudget default/probed (pod default/probed-"
		if ro.Status.State != rollout.Halted || !strings.HasPrefix(ro.Status.Reason, want) || !strings.Contains(ro.Status.Reason, "allowed no disruption within 20s") {
			t.Errorf("rollout %s, reason %q; want Halted, %q...", ro.Status.State, ro.Status.Reason, want)
		}
		eventuallyStatus(t, c, n, 10*time.Second, Assigned("pdbwait-a"), Active("pdbwait-a"), NoError())
		if got := c.Node(n).KubeletStarts(); got != starts {
			t.Errorf("node %s: %d kubelet starts, want %d", n, got, starts)
		}
	})
}

// logWorkloads logs, when the test failed, the pods, budgets and Events of
// "default".
func logWorkloads(t *testing.T, c *framework.Cluster) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		out, err := kubectlRun(c, "", "get", "pods,pdb,events", "-n", "default", "-o", "wide")
		t.Logf("pods, budgets and events of default (%v):\n%s", err, out)
	})
}

// rolloutStore is a store of c's rollouts in the config namespace.
func rolloutStore(t *testing.T, c *framework.Cluster) *rollout.Store {
	t.Helper()
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	return &rollout.Store{Client: dyn, Namespace: source.DefaultNamespace}
}

// createSpreadDeployment creates, in "default", the Deployment name of
// replicas pods labelled app=name, one per node at most (required
// anti-affinity), hostNetwork (the harness has no CNI), running image, with
// its own ServiceAccount (the harness runs no serviceaccount controller);
// edit changes the pod spec when set.
func createSpreadDeployment(t *testing.T, c *framework.Cluster, name string, replicas int32, image string, edit func(*corev1.PodSpec)) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": name}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}, AutomountServiceAccountToken: ptr.To(false)}
	if _, err := c.Client.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := corev1.PodSpec{
		HostNetwork:                   true,
		ServiceAccountName:            name,
		AutomountServiceAccountToken:  ptr.To(false),
		TerminationGracePeriodSeconds: ptr.To[int64](1),
		Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
				TopologyKey:   corev1.LabelHostname,
			}},
		}},
		Containers: []corev1.Container{{Name: name, Image: image}},
		// The harness runs no node lifecycle controller, which would
		// remove the taint a kubelet registers its Node with.
		Tolerations: []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
	}
	if edit != nil {
		edit(&spec)
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
	if _, err := c.Client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// setBudget creates or changes the PodDisruptionBudget name in "default",
// over the pods app=name, to maxUnavailable.
func setBudget(t *testing.T, c *framework.Cluster, name string, maxUnavailable int32) {
	t.Helper()
	ctx := context.Background()
	pdbs := c.Client.PolicyV1().PodDisruptionBudgets("default")
	pdb, err := pdbs.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		pdb = &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: policyv1.PodDisruptionBudgetSpec{
				MaxUnavailable: ptr.To(intstr.FromInt32(maxUnavailable)),
				Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			},
		}
		if _, err := pdbs.Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	patch := fmt.Sprintf(`{"spec":{"maxUnavailable":%d}}`, maxUnavailable)
	if _, err := pdbs.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitBudget waits until the disruption controller reports, for the
// current spec of budget name, healthy pods and allowed disruptions.
func waitBudget(t *testing.T, c *framework.Cluster, name string, healthy, allowed int32) {
	t.Helper()
	var st policyv1.PodDisruptionBudgetStatus
	waitFor(t, 3*time.Minute, fmt.Sprintf("PodDisruptionBudget %s: %d healthy, %d disruptions allowed", name, healthy, allowed), func() bool {
		pdb, err := c.Client.PolicyV1().PodDisruptionBudgets("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		st = pdb.Status
		return st.ObservedGeneration >= pdb.Generation && st.CurrentHealthy == healthy && st.DisruptionsAllowed == allowed
	})
}

// availability counts, from a watch of pods, how many are available
// (Ready and not being deleted), and remembers the least.
type availability struct {
	mu    sync.Mutex
	ready map[string]bool
	low   int
	// trace lists each change of the count, for the log.
	trace []string
}

func (a *availability) least() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.low
}

func (a *availability) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return strings.Join(a.trace, "\n")
}

func (a *availability) update(pod *corev1.Pod, gone bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ok := !gone && pod.DeletionTimestamp == nil && podReady(pod)
	if ok {
		a.ready[pod.Name] = true
	} else {
		delete(a.ready, pod.Name)
	}
	n := len(a.ready)
	if n < a.low {
		a.low = n
	}
	if len(a.trace) == 0 || !strings.HasSuffix(a.trace[len(a.trace)-1], fmt.Sprintf(" %d available", n)) {
		a.trace = append(a.trace, fmt.Sprintf("%s %s: %d available", time.Now().Format("15:04:05.000"), pod.Name, n))
	}
}

// watchAvailable watches the pods of "default" that selector matches,
// from now to the end of the test.
func watchAvailable(t *testing.T, c *framework.Cluster, selector string) *availability {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace("default"),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	a := &availability{ready: map[string]bool{}, low: 1 << 30}
	inf := f.Core().V1().Pods().Informer()
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.update(obj.(*corev1.Pod), false) },
		UpdateFunc: func(_, obj any) { a.update(obj.(*corev1.Pod), false) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				a.update(p, true)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		t.Fatal("watch the pods: not synced")
	}
	// The handler got the initial list one pod at a time: count from
	// there.
	a.mu.Lock()
	a.low = len(a.ready)
	a.mu.Unlock()
	return a
}
