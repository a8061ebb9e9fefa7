package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// TestRollout rolls configs out over three real kubelets, each with its dkc
// agent (drop-in mode, so one ConfigMap fits every node): a good config
// under --max-unavailable 1 with the restarts measured against each other's
// apply windows; a bad config that halts on the canary; a CLI killed with
// SIGKILL and resumed; pause, resume and undo; back to local with the
// background driver; --drain over a node with a pod bound to it; and a
// maintenance window that opens during the test.
func TestRollout(t *testing.T) {
	t.Parallel() // docs/development.md, "Tests in parallel"
	c, names := rolloutCluster(t, nil)
	ctx := context.Background()
	partial := func(extra string) string {
		return "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\n" + extra
	}
	createConfigMap(t, c, "ro-a", partial("maxPods: 61\n"))
	createConfigMap(t, c, "ro-c", partial("maxPods: 63\n"))
	// everyNodeFrom is the starting state of a subtest: cm active and
	// last-known-good on every node, assigned by hand unless it is.
	everyNodeFrom := func(t *testing.T, cm string) {
		t.Helper()
		for _, n := range names {
			startFrom(t, c, n, cm, time.Minute)
		}
	}

	t.Run("good config, max-unavailable 1: restarts never overlap", func(t *testing.T) {
		for _, n := range names {
			startUnassigned(t, c, n, time.Minute)
		}
		began := time.Now()
		r := dkc(t, c, "", "rollout", "start", "--config", "ro-a", "--all", "--name", "a", "--max-unavailable", "1", "--wait", "--timeout", "5m")
		if r.ExitCode != 0 {
			t.Fatalf("rollout start: exit %d", r.ExitCode)
		}
		for _, n := range names {
			if !strings.Contains(r.Stdout, "rollout/a node/"+n+" Done") {
				t.Errorf("no progress line %q", "rollout/a node/"+n+" Done")
			}
		}
		ro := rolloutObject(t, c, "a")
		if ro.Status.State != rollout.Done {
			t.Fatalf("state %s, want Done", ro.Status.State)
		}
		windows := applyWindows(t, ro, names, time.Now())
		for _, n := range names {
			eventuallyStatus(t, c, n, 10*time.Second, Active("ro-a"), NoError())
		}
		if windows[0].node != names[0] {
			t.Errorf("first node %s, want the canary %s", windows[0].node, names[0])
		}
		minGap := checkApplyWindows(t, c, windows, began)
		t.Logf("MEASURED: rollout of 3 nodes in %s; apply windows %s; smallest gap between windows %s",
			time.Since(began).Round(time.Millisecond), windowLengths(windows), minGap.Round(time.Millisecond))
	})

	t.Run("bad config halts on the canary; other kubelets untouched", func(t *testing.T) {
		createConfigMap(t, c, "ro-bad", partial("containerRuntimeEndpoint: unix:///nonexistent.sock\n"))
		// The canary rolls back to its last-known-good config: ro-a once
		// its trial (3 s from its apply) ended. A fast machine finishes the
		// rollout above sooner than that, and the rollback would then
		// rightly go to the local config.
		everyNodeFrom(t, "ro-a")
		pids := map[string]int{}
		for _, n := range c.Nodes {
			pids[n.Name] = n.KubeletPID()
		}
		r := dkc(t, c, "", "rollout", "start", "--config", "ro-bad", "--all", "--name", "bad", "--allow-unsafe=redirect", "--wait", "--timeout", "3m")
		if r.ExitCode != 2 {
			t.Fatalf("rollout start: exit %d, want 2 (halted)", r.ExitCode)
		}
		canary := names[0]
		if !strings.Contains(r.Stderr, "node/"+canary+": ") || !strings.Contains(r.Stderr, "halted") {
			t.Errorf("stderr does not name the canary and the halt:\n%s", r.Stderr)
		}
		ro := rolloutObject(t, c, "bad")
		if ro.Status.State != rollout.Halted || !strings.HasPrefix(ro.Status.Reason, "node/"+canary+": failed to validate config") {
			t.Errorf("state %s, reason %q; want Halted on node/%s", ro.Status.State, ro.Status.Reason, canary)
		}
		st := eventuallyStatus(t, c, canary, 10*time.Second, Active("ro-a"), AnyError())
		_ = st
		for _, n := range c.Nodes[1:] {
			if got := n.KubeletPID(); got != pids[n.Name] {
				t.Errorf("node %s: kubelet PID %d, was %d: restarted after the canary failed", n.Name, got, pids[n.Name])
			}
			if src, _, _ := source.Assigned(readNode(t, c.Client, n.Name)); !framework.IsConfigMap(src, "ro-a") {
				t.Errorf("node %s assigned %v, want still ro-a", n.Name, src)
			}
		}
		if c.Nodes[0].KubeletPID() == pids[canary] {
			t.Errorf("canary kubelet PID unchanged: the bad config was never tried")
		}
		r = dkc(t, c, "", "rollout", "status", "bad")
		if r.ExitCode != 2 || !strings.Contains(r.Stdout, "Halted") || !strings.Contains(r.Stdout, "failed") {
			t.Errorf("rollout status: exit %d, want 2 and the halt shown:\n%s", r.ExitCode, r.Stdout)
		}
	})

	t.Run("CLI killed with SIGKILL, then resume: completes, no node applied twice", func(t *testing.T) {
		everyNodeFrom(t, "ro-a")
		starts := map[string]int{}
		for _, n := range c.Nodes {
			starts[n.Name] = n.KubeletStarts()
		}
		bg := startDKCBackground(t, c, "rollout", "start", "--config", "ro-c", "--all", "--name", "c", "--wait")
		// The canary is done and the next node started: kill the client.
		bg.waitForLine(t, 2*time.Minute, func(l string) bool { return l == "rollout/c node/"+names[1]+" InProgress wave=1" })
		if err := bg.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		bg.wait(t, 10*time.Second)
		out := mustDKC(t, c, "", "rollout", "status", "c").Stdout
		if !strings.Contains(out, "Running") {
			t.Errorf("status after the kill does not say Running:\n%s", out)
		}
		r := dkc(t, c, "", "rollout", "resume", "c", "--wait", "--timeout", "3m")
		if r.ExitCode != 0 {
			t.Fatalf("rollout resume: exit %d", r.ExitCode)
		}
		if ro := rolloutObject(t, c, "c"); ro.Status.State != rollout.Done {
			t.Fatalf("state %s after resume, want Done", ro.Status.State)
		}
		for _, n := range c.Nodes {
			eventuallyStatus(t, c, n.Name, 10*time.Second, Active("ro-c"), NoError())
			applied := 0
			h, err := source.History(readNode(t, c.Client, n.Name))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range h {
				if e.Result == source.ResultApplied && framework.IsConfigMap(e.Source, "ro-c") {
					applied++
				}
			}
			if applied != 1 {
				t.Errorf("node %s: history shows ro-c applied %d times, want 1", n.Name, applied)
			}
			if d := n.KubeletStarts() - starts[n.Name]; d != 1 {
				t.Errorf("node %s: kubelet started %d times, want 1", n.Name, d)
			}
		}
		hist := mustDKC(t, c, "", "rollout", "history", names[2]).Stdout
		if !strings.Contains(hist, "kube-system/ro-c") || !strings.Contains(hist, "Applied") {
			t.Errorf("rollout history %s lacks the ro-c apply:\n%s", names[2], hist)
		}
	})

	t.Run("pause holds the next wave; resume finishes; undo goes back", func(t *testing.T) {
		createConfigMap(t, c, "ro-d", partial("maxPods: 64\n"))
		everyNodeFrom(t, "ro-c")
		bg := startDKCBackground(t, c, "rollout", "start", "--config", "ro-d", "--all", "--name", "d", "--soak", "8s", "--wait")
		bg.waitForLine(t, 2*time.Minute, func(l string) bool { return l == "rollout/d node/"+names[0]+" Done wave=0" })
		mustDKC(t, c, "", "rollout", "pause", "d")
		if code := bg.wait(t, 30*time.Second); code != 1 {
			t.Errorf("the driving client exited %d on pause, want 1", code)
		}
		// Longer than the soak: no node after the canary gets ro-d.
		consistently(t, 12*time.Second, "paused", func() bool {
			for _, n := range names[1:] {
				if src, _, _ := source.Assigned(readNode(t, c.Client, n)); !framework.IsConfigMap(src, "ro-c") {
					return false
				}
			}
			return true
		})
		for _, n := range names[1:] {
			if src, _, _ := source.Assigned(readNode(t, c.Client, n)); !framework.IsConfigMap(src, "ro-c") {
				t.Errorf("paused rollout assigned %v to %s", src, n)
			}
		}
		if ro := rolloutObject(t, c, "d"); ro.Status.State != rollout.Paused {
			t.Errorf("state %s, want Paused", ro.Status.State)
		}
		if r := dkc(t, c, "", "rollout", "resume", "d", "--wait", "--timeout", "3m"); r.ExitCode != 0 {
			t.Fatalf("rollout resume: exit %d", r.ExitCode)
		}
		for _, n := range names {
			if src, _, _ := source.Assigned(readNode(t, c.Client, n)); !framework.IsConfigMap(src, "ro-d") {
				t.Errorf("after resume %s is assigned %v, want ro-d", n, src)
			}
		}

		r := dkc(t, c, "", "rollout", "undo", "d", "--canary", "0", "--wait", "--timeout", "3m")
		if r.ExitCode != 0 {
			t.Fatalf("rollout undo: exit %d", r.ExitCode)
		}
		for _, n := range names {
			eventuallyStatus(t, c, n, 10*time.Second, Active("ro-c"), NoError())
		}
	})

	t.Run("back to local, driven by one client and followed by another with status -w", func(t *testing.T) {
		everyNodeFrom(t, "ro-c")
		bg := startDKCBackground(t, c, "rollout", "start", "--to-local", "--all", "--name", "local", "--max-unavailable", "34%", "--wait")
		bg.waitForLine(t, 30*time.Second, func(l string) bool { return l == "rollout/local Running" })
		w := dkc(t, c, "", "rollout", "status", "local", "-w", "--timeout", "3m")
		if w.ExitCode != 0 {
			t.Errorf("status -w: exit %d", w.ExitCode)
		}
		if !strings.Contains(w.Stdout, "rollout/local Done") {
			t.Errorf("status -w did not print the end:\n%s", w.Stdout)
		}
		if code := bg.wait(t, 30*time.Second); code != 0 {
			t.Errorf("the driving client exited %d, want 0", code)
		}
		for _, n := range names {
			node := readNode(t, c.Client, n)
			if src, _, _ := source.Assigned(node); src != nil {
				t.Errorf("%s still assigned %v", n, src)
			}
			// The agent reports the local config as no status, or as one
			// with nothing active.
			if st, _, _ := source.Status(node); st != nil && (st.Active != nil || st.Error != "") {
				t.Errorf("%s status %+v, want the local config active", n, st)
			}
		}
	})

	t.Run("a window that opens during the test: no node starts before it, then the rollout completes", func(t *testing.T) {
		everyNodeFrom(t, "ro-a")
		createConfigMap(t, c, "ro-w", partial("maxPods: 64\n"))
		// Windows have minute granularity: the next whole minute at least
		// 40 s ahead, long enough to see that nothing starts before it.
		now := time.Now().UTC()
		opens := now.Add(time.Minute).Truncate(time.Minute)
		if opens.Sub(now) < 40*time.Second {
			opens = opens.Add(time.Minute)
		}
		window := opens.Format("Mon 15:04") + " 30m UTC"
		bg := startDKCBackground(t, c, "rollout", "start", "--config", "ro-w", "--all", "--name", "w", "--window", window, "--wait", "--timeout", "5m")
		want := "OutsideWindow: no node starts before the next maintenance window, at " + opens.Format(time.RFC3339)
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			// Before the client created the rollout, status exits 1.
			return dkc(t, c, "", "rollout", "status", "w", "-o", "jsonpath={.status.reason}").Stdout == want, nil
		}); err != nil {
			t.Fatalf("the rollout never said %q (window %q): %v; stderr:\n%s", want, window, err, bg.stderr())
		}
		if out := readDKC(t, c, "rollout", "list", "-o", "wide").Stdout; !strings.Contains(out, "OutsideWindow") {
			t.Errorf("rollout list -o wide does not show OutsideWindow:\n%s", out)
		}
		// Until the window opens, no node is assigned ro-w: every Node as
		// listed, then every change a watch delivers until 2 s before.
		list, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		notAssigned := func(n *corev1.Node) {
			t.Helper()
			if src, _, _ := source.Assigned(n); !framework.IsConfigMap(src, "ro-a") {
				t.Fatalf("node %s assigned %v at %s, before the window opens at %s", n.Name, src, time.Now().UTC().Format(time.RFC3339), opens.Format(time.RFC3339))
			}
		}
		for i := range list.Items {
			notAssigned(&list.Items[i])
		}
		wctx, cancel := context.WithDeadline(ctx, opens.Add(-2*time.Second))
		w, err := c.Client.CoreV1().Nodes().Watch(wctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok {
				notAssigned(n)
			}
		}
		w.Stop()
		cancel()
		if left := time.Until(opens.Add(-2 * time.Second)); left > time.Second {
			t.Fatalf("the watch of the Nodes ended %s before the window opens", left.Round(time.Second))
		}
		if code := bg.wait(t, 4*time.Minute); code != 0 {
			t.Fatalf("rollout start --wait: exit %d; stderr:\n%s", code, bg.stderr())
		}
		ro := rolloutObject(t, c, "w")
		if ro.Status.State != rollout.Done || ro.Status.Reason != "" {
			t.Errorf("state %s, reason %q; want Done with no reason", ro.Status.State, ro.Status.Reason)
		}
		for _, n := range names {
			eventuallyStatus(t, c, n, 10*time.Second, Active("ro-w"), NoError())
			if st := ro.NodeStatus(n).Started; st == nil || st.Time.Before(opens) {
				t.Errorf("node %s started at %v, before the window opened at %s", n, st, opens.Format(time.RFC3339))
			}
		}
	})
	t.Run("drain: refused without --drain; evicts the bound pod and uncordons", func(t *testing.T) {
		n := names[0]
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "ro-topology", Namespace: "kube-system"},
			Data:       map[string]string{"kubelet": partial("topologyManagerPolicy: best-effort\n")},
		}
		createTestConfigMap(t, c.Client, cm)
		r := dkc(t, c, "", "rollout", "start", "--config", "ro-topology", n, "--wait")
		if r.ExitCode != 1 || !strings.Contains(r.Stderr, "topologyManagerPolicy") || !strings.Contains(r.Stderr, "--drain") {
			t.Errorf("without --drain: exit %d, stderr %q; want 1 naming topologyManagerPolicy and --drain", r.ExitCode, r.Stderr)
		}
		// No controller manager runs: make the ServiceAccount that admission
		// wants for a pod.
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "default"}}
		if _, err := c.Client.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		zero := int64(0)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "bound", Namespace: "default"},
			Spec: corev1.PodSpec{
				NodeName:                      n,
				TerminationGracePeriodSeconds: &zero,
				Containers:                    []corev1.Container{{Name: "c", Image: "registry.invalid/none:1"}},
			},
		}
		if _, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The agents refuse a resource manager change unless the
		// rollout allows it.
		r = dkc(t, c, "", "rollout", "start", "--config", "ro-topology", n, "--drain", "--wait")
		if r.ExitCode != 1 || !strings.Contains(r.Stderr, "--allow-unsafe=resource-managers") {
			t.Errorf("without --allow-unsafe: exit %d, stderr %q; want 1 naming --allow-unsafe=resource-managers", r.ExitCode, r.Stderr)
		}
		r = dkc(t, c, "", "rollout", "start", "--config", "ro-topology", n, "--name", "drain", "--drain", "--allow-unsafe=resource-managers", "--drain-force", "--drain-timeout", "1m", "--wait", "--timeout", "3m")
		if r.ExitCode != 0 {
			t.Fatalf("rollout --drain: exit %d", r.ExitCode)
		}
		if !strings.Contains(r.Stderr, "pod/bound evicted from node/"+n) {
			t.Errorf("stderr does not show the eviction:\n%s", r.Stderr)
		}
		if _, err := c.Client.CoreV1().Pods("default").Get(ctx, "bound", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("pod bound: %v, want NotFound", err)
		}
		node := readNode(t, c.Client, n)
		if node.Spec.Unschedulable {
			t.Error("node still cordoned after the rollout")
		}
		if ro := rolloutObject(t, c, "drain"); ro.NodeStatus(n).Cordoned || ro.Status.State != rollout.Done {
			t.Errorf("rollout %s, node %+v; want Done and uncordoned", ro.Status.State, ro.NodeStatus(n))
		}
		if got := configz(t, c, n)["topologyManagerPolicy"]; got != "best-effort" {
			t.Errorf("configz topologyManagerPolicy %v, want best-effort", got)
		}
	})
	t.Run("a drain that halts leaves its node cordoned; its undo says the budget holds it, and with room uncordons it", func(t *testing.T) {
		// The node runs ro-topology, as the subtest above left it.
		n := names[0]
		createConfigMap(t, c, "ro-drainbad", partial("topologyManagerPolicy: single-numa-node\ncontainerRuntimeEndpoint: unix:///nonexistent.sock\n"))
		r := dkc(t, c, "", "rollout", "start", "--config", "ro-drainbad", n, "--name", "drainbad", "--drain",
			"--allow-unsafe=resource-managers,redirect", "--drain-timeout", "1m", "--wait", "--timeout", "3m")
		if r.ExitCode != 2 {
			t.Fatalf("rollout start of a config the agent refuses: exit %d, want 2 (halted)\n%s", r.ExitCode, r.Stderr)
		}
		if !readNode(t, c.Client, n).Spec.Unschedulable {
			t.Fatalf("node %s is schedulable after the halted drain; the test needs the cordon a halt leaves (docs/rollout.md, Halt)", n)
		}
		// The undo's budget is the halted rollout's, 1, and the node it
		// left cordoned fills it.
		r = dkc(t, c, "", "rollout", "undo", "drainbad", "--wait", "--timeout", "15s")
		if r.ExitCode == 0 {
			t.Fatalf("rollout undo with a budget of 1 that the cordoned node fills: exit 0, want it to wait\n%s", r.Stdout)
		}
		var undo rollout.Rollout
		if out := readDKC(t, c, "rollout", "status", "-o", "json").Stdout; json.Unmarshal([]byte(out), &undo) != nil || undo.Spec.UndoOf != "drainbad" {
			t.Fatalf("the newest rollout is not the undo of drainbad:\n%s", out)
		}
		if want := "BudgetHeld: no node starts while node/" + n + " (cordoned) is unavailable"; !strings.HasPrefix(undo.Status.Reason, want) {
			t.Errorf("undo %s: state %s, reason %q; want it to begin %q", undo.Name, undo.Status.State, undo.Status.Reason, want)
		}
		mustDKC(t, c, "", "rollout", "abort", undo.Name)
		r = dkc(t, c, "", "rollout", "undo", "drainbad", "--max-unavailable", "2", "--wait", "--timeout", "3m")
		if r.ExitCode != 0 {
			t.Fatalf("rollout undo --max-unavailable 2: exit %d\n%s", r.ExitCode, r.Stderr)
		}
		eventuallyStatus(t, c, n, 10*time.Second, Active("ro-topology"), NoError())
		if readNode(t, c.Client, n).Spec.Unschedulable {
			t.Errorf("node %s still cordoned after the undo: the cordon was drainbad's, not there before it", n)
		}
	})
}

// rolloutCluster starts three real kubelets, each with its dkc agent in
// drop-in mode (so one partial ConfigMap fits every node), and returns the
// cluster and its node names in rollout order. agentFlags, when set, gives
// each node's agent more flags.
func rolloutCluster(t *testing.T, agentFlags func(*framework.Node) []string) (*framework.Cluster, []string) {
	t.Helper()
	return rolloutClusterWith(t, framework.Options{Nodes: 3}, agentFlags)
}

// rolloutClusterWith is rolloutCluster on a cluster made with opts.
func rolloutClusterWith(t *testing.T, opts framework.Options, agentFlags func(*framework.Node) []string) (*framework.Cluster, []string) {
	t.Helper()
	c := framework.Setup(t, opts)
	framework.InstallCRDs(t, c)
	if err := c.ApplyManifest(context.Background(), filepath.Join("..", "..", "deploy", "rbac.yaml"), false); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := c.UserKubeconfig(framework.AgentIdentity)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		o := framework.AgentOptions{
			Kubeconfig: kubeconfig,
			ApplyMode:  "dropin",
			// Well over a restart that meets the kubelet's PLEG wait
			// (about 10 s here): a slow machine must not roll back.
			HealthTimeout: 25 * time.Second,
			TrialDuration: 3 * time.Second,
		}
		if agentFlags != nil {
			o.Extra = agentFlags(n)
		}
		if _, err := n.StartAgent(framework.DKCBinary(), n.AgentArgs(o)); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.Nodes {
		waitFor(t, 20*time.Second, "agent /healthz on "+n.Name, func() bool {
			body, err := framework.HTTPGet("http://" + n.IP + ":10391/healthz")
			return err == nil && body == "ok"
		})
	}
	names := c.NodeNames()
	sort.Strings(names)
	return c, names
}

// rolloutObject reads rollout name through `rollout status -o json`, in
// any state.
func rolloutObject(t *testing.T, c *framework.Cluster, name string) *rollout.Rollout {
	t.Helper()
	out := readDKC(t, c, "rollout", "status", name, "-o", "json").Stdout
	var r rollout.Rollout
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("rollout status -o json: %v\n%s", err, out)
	}
	return &r
}

// applyWindow is one node's turn in a rollout with a budget of one, from
// the moment the rollout started it (its mark) to the moment it started the
// next node, or the rollout's end for the last one: the node's restart and
// health gate must fall inside it, and no other node's.
type applyWindow struct {
	node       string
	start, end time.Time
}

// applyWindows returns the turns of nodes in rollout ro, which ended at end,
// in the order they started. Every node must be Done.
func applyWindows(t *testing.T, ro *rollout.Rollout, nodes []string, end time.Time) []applyWindow {
	t.Helper()
	var windows []applyWindow
	for _, n := range nodes {
		ns := ro.NodeStatus(n)
		if ns.Phase != rollout.Succeeded || ns.Started == nil {
			t.Fatalf("node %s: %+v, want Done with its start", n, ns)
		}
		windows = append(windows, applyWindow{node: n, start: ns.Started.Time})
	}
	sort.Slice(windows, func(i, j int) bool { return windows[i].start.Before(windows[j].start) })
	for i := range windows {
		windows[i].end = end
		if i+1 < len(windows) {
			windows[i].end = windows[i+1].start
		}
	}
	return windows
}

// windowLengths lists each window's node and length, for the log.
func windowLengths(windows []applyWindow) string {
	var out []string
	for _, w := range windows {
		out = append(out, fmt.Sprintf("%s %s", w.node, w.end.Sub(w.start).Round(time.Millisecond)))
	}
	return strings.Join(out, ", ")
}

// checkApplyWindows checks that no two windows overlap and that every
// kubelet (re)start of c's nodes since began falls inside its own node's
// window and no other, once per node. It returns the smallest gap between
// two windows.
func checkApplyWindows(t *testing.T, c *framework.Cluster, windows []applyWindow, began time.Time) time.Duration {
	t.Helper()
	minGap := time.Duration(1<<63 - 1)
	for i := 1; i < len(windows); i++ {
		gap := windows[i].start.Sub(windows[i-1].end)
		if gap < 0 {
			t.Errorf("apply windows overlap: %s %s..%s and %s %s..%s", windows[i-1].node, windows[i-1].start.Format(time.StampMicro), windows[i-1].end.Format(time.StampMicro),
				windows[i].node, windows[i].start.Format(time.StampMicro), windows[i].end.Format(time.StampMicro))
		}
		minGap = min(minGap, gap)
	}
	for _, n := range c.Nodes {
		starts := kubeletStartTimes(t, n, began)
		if len(starts) != 1 {
			t.Errorf("node %s: kubelet started %d times during the rollout, want 1: %v", n.Name, len(starts), starts)
		}
		for _, s := range starts {
			for _, w := range windows {
				inside := !s.Before(w.start) && !s.After(w.end)
				if inside != (w.node == n.Name) {
					t.Errorf("kubelet of %s started at %s; window of %s is %s..%s", n.Name, s.Format(time.StampMicro), w.node, w.start.Format(time.StampMicro), w.end.Format(time.StampMicro))
				}
			}
		}
	}
	return minGap
}

// kubeletStartTimes reads the harness supervisor's start lines from n's
// kubelet log: the kubelet (re)starts after since.
func kubeletStartTimes(t *testing.T, n *framework.Node, since time.Time) []time.Time {
	t.Helper()
	f, err := os.Open(n.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	re := regexp.MustCompile(`^==== dkc harness: start \d+ of \S+ at (\S+)$`)
	var out []time.Time
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		m := re.FindStringSubmatch(s.Text())
		if m == nil {
			continue
		}
		ts, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			t.Fatal(err)
		}
		if ts.After(since) {
			out = append(out, ts)
		}
	}
	return out
}
