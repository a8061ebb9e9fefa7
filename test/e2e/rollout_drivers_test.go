package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// TestRolloutDrivers runs rollouts over three real kubelets, each with its
// dkc agent, while something else acts on the same nodes: a second client
// driving the same rollout, and an operator assigning a node by hand, once
// before the rollout reached it and once while the rollout applies it.
// Each agent restarts its kubelet through a RestartGate, so that the test
// can hold a node's apply in progress for as long as it needs.
func TestRolloutDrivers(t *testing.T) {
	t.Parallel() // docs/development.md, "Tests in parallel"
	ctx := context.Background()
	gates := map[string]*framework.RestartGate{}
	c, names := rolloutCluster(t, func(n *framework.Node) []string {
		g, err := n.NewRestartGate()
		if err != nil {
			t.Fatal(err)
		}
		gates[n.Name] = g
		return []string{"--restart-command", g.Command}
	})
	// hold makes node's next kubelet restart pause, until release, after
	// the new kubelet started and before the agent's health gate.
	hold := func(t *testing.T, node string) {
		t.Helper()
		if err := gates[node].Hold(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = gates[node].Release() })
	}
	waitHeld := func(t *testing.T, node string) {
		t.Helper()
		if err := gates[node].WaitPaused(ctx, 2*time.Minute); err != nil {
			t.Fatalf("no held kubelet restart on %s: %v", node, err)
		}
	}
	release := func(t *testing.T, node string) {
		t.Helper()
		if err := gates[node].Release(); err != nil {
			t.Fatal(err)
		}
	}
	byName := map[string]*framework.Node{}
	for _, n := range c.Nodes {
		byName[n.Name] = n
	}
	// kubeletStarts counts each node's kubelet starts so far; restarts is
	// how often node's kubelet started since kubeletStarts returned base.
	kubeletStarts := func() map[string]int {
		out := map[string]int{}
		for _, n := range c.Nodes {
			out[n.Name] = n.KubeletStarts()
		}
		return out
	}
	restarts := func(base map[string]int, node string) int {
		return byName[node].KubeletStarts() - base[node]
	}
	assigned := func(t *testing.T, node string) *corev1.NodeConfigSource {
		t.Helper()
		src, _, err := source.Assigned(readNode(t, c.Client, node))
		if err != nil {
			t.Fatal(err)
		}
		return src
	}

	t.Run("the rollout's assignment patch is conditional: a stale resourceVersion gets Conflict", func(t *testing.T) {
		// What assignOver relies on, on the real apiserver: a merge
		// patch that names a resourceVersion applies only to that
		// version of the Node.
		n := names[len(names)-1]
		stale := readNode(t, c.Client, n)
		if _, err := c.Client.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, []byte(`{"metadata":{"labels":{"dkc-test/touched":"yes"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		patch, err := source.AssignPatchAt(source.Annotation, &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
			Namespace: "kube-system", Name: "never-applied", KubeletConfigKey: "kubelet"}}, nil, stale.ResourceVersion)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Client.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: source.FieldManager})
		if !apierrors.IsConflict(err) {
			t.Fatalf("assignment patch at the stale resourceVersion %s: %v, want Conflict", stale.ResourceVersion, err)
		}
		if src := assigned(t, n); framework.IsConfigMap(src, "never-applied") {
			t.Fatalf("node %s assigned never-applied despite the Conflict", n)
		}
	})

	createConfigMap(t, c, "drv-a", maxPodsConfig(71))

	t.Run("two drivers at once: every kubelet restarts once, never two at a time", func(t *testing.T) {
		base := kubeletStarts()
		began := time.Now()
		// The canary's apply waits, held, until the second client runs.
		hold(t, names[0])
		first := startDKCBackground(t, c, "rollout", "start", "--config", "drv-a", "--all", "--name", "drivers",
			"--max-unavailable", "1", "--wait", "--timeout", "5m")
		first.waitForLine(t, 2*time.Minute, func(l string) bool { return l == "rollout/drivers node/"+names[0]+" InProgress wave=0" })
		// resume on a Running rollout does not change its state: it drives
		// it beside the first client.
		second := startDKCBackground(t, c, "rollout", "resume", "drivers", "--wait", "--timeout", "5m")
		waitHeld(t, names[0])
		// The second client reads the rollout and starts its watches; it
		// must not exit while the canary is in progress.
		consistently(t, 3*time.Second, "driving beside the first client", func() bool { return !second.exited() })
		if second.exited() {
			t.Fatalf("rollout resume exited while the canary was in progress: exit %d\n%s", second.wait(t, time.Second), second.stderr())
		}
		release(t, names[0])
		codeSecond := second.wait(t, 5*time.Minute)
		codeFirst := first.wait(t, time.Minute)
		if codeFirst != 0 || codeSecond != 0 {
			t.Errorf("rollout start --wait exit %d, rollout resume exit %d; want 0 and 0\nstart stderr:\n%s\nresume stderr:\n%s",
				codeFirst, codeSecond, first.stderr(), second.stderr())
		}
		for _, d := range []struct {
			name string
			b    *backgroundDKC
		}{{"rollout start --wait", first}, {"rollout resume", second}} {
			name, lines := d.name, d.b.stop(t)
			t.Logf("%s printed:\n%s", name, strings.Join(lines, "\n"))
			if !slices.Contains(lines, "rollout/drivers Done") {
				t.Errorf("%s did not print rollout/drivers Done", name)
			}
		}
		ro := rolloutObject(t, c, "drivers")
		if ro.Status.State != rollout.Done {
			t.Fatalf("state %s, want Done", ro.Status.State)
		}
		windows := applyWindows(t, ro, names, time.Now())
		if windows[0].node != names[0] {
			t.Errorf("first node %s, want the canary %s", windows[0].node, names[0])
		}
		for _, n := range names {
			eventuallyStatus(t, c, n, 10*time.Second, Active("drv-a"), NoError())
			if d := restarts(base, n); d != 1 {
				t.Errorf("node %s: kubelet started %d times, want 1", n, d)
			}
		}
		minGap := checkApplyWindows(t, c, windows, began)
		t.Logf("MEASURED: two drivers rolled 3 nodes out in %s; apply windows %s; smallest gap between windows %s",
			time.Since(began).Round(time.Millisecond), windowLengths(windows), minGap.Round(time.Millisecond))
	})

	t.Run("node assigned by hand while Waiting: assigned the target at its turn, the manual config is previous", func(t *testing.T) {
		createConfigMap(t, c, "drv-x", maxPodsConfig(72))
		createConfigMap(t, c, "drv-y", maxPodsConfig(73))
		last := names[2]
		// The starting state: every node runs an assignment (drv-a, as
		// the subtest above leaves them), for undo to send it back to.
		before := map[string]*corev1.NodeConfigSource{}
		for _, n := range names {
			startAssigned(t, c, n, "drv-a", time.Minute)
			before[n] = assigned(t, n)
		}
		base := kubeletStarts()
		bg := startDKCBackground(t, c, "rollout", "start", "--config", "drv-x", "--all", "--name", "manual-waiting",
			"--max-unavailable", "1", "--soak", "20s", "--wait", "--timeout", "5m")
		bg.waitForLine(t, 2*time.Minute, func(l string) bool { return l == "rollout/manual-waiting node/"+names[0]+" Done wave=0" })
		// The canary soaks; the last node's turn is two waves away.
		mustDKC(t, c, "", "assign", last, "--config", "drv-y", "--wait", "--timeout", "1m")
		if ro := rolloutObject(t, c, "manual-waiting"); ro.NodeStatus(last).Phase != rollout.Waiting {
			t.Fatalf("node %s %+v right after the manual assignment; want Waiting (the test needs more soak)", last, ro.NodeStatus(last))
		}
		if code := bg.wait(t, 4*time.Minute); code != 0 {
			t.Fatalf("rollout start --wait: exit %d, want 0; stderr:\n%s", code, bg.stderr())
		}
		ro := rolloutObject(t, c, "manual-waiting")
		if ro.Status.State != rollout.Done {
			t.Fatalf("state %s, want Done", ro.Status.State)
		}
		for _, n := range names {
			ns := ro.NodeStatus(n)
			want := before[n]
			if n == last {
				want = &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "drv-y", KubeletConfigKey: "kubelet"}}
			}
			if ns.Phase != rollout.Succeeded || !source.Equal(ns.Previous, want) {
				t.Errorf("node %s: phase %s, previous %s; want Done, previous %s", n, ns.Phase, rollout.DescribeTarget(ns.Previous), rollout.DescribeTarget(want))
			}
			eventuallyStatus(t, c, n, 10*time.Second, Active("drv-x"), NoError())
			wantStarts := 1
			if n == last {
				wantStarts = 2 // drv-y by hand, then drv-x by the rollout
			}
			if d := restarts(base, n); d != wantStarts {
				t.Errorf("node %s: kubelet started %d times, want %d", n, d, wantStarts)
			}
		}
		// undo sends the node back to what the operator gave it.
		r := dkc(t, c, "", "rollout", "undo", "manual-waiting", "--canary", "0", "--max-unavailable", "3", "--wait", "--timeout", "3m")
		if r.ExitCode != 0 {
			t.Fatalf("rollout undo: exit %d", r.ExitCode)
		}
		for _, n := range names {
			want := "drv-y"
			if n != last {
				want = before[n].ConfigMap.Name
			}
			eventuallyStatus(t, c, n, 10*time.Second, Active(want), NoError())
		}
	})

	t.Run("node assigned by hand while InProgress: the rollout halts naming it; resume does not overwrite it", func(t *testing.T) {
		createConfigMap(t, c, "drv-z", maxPodsConfig(74))
		createConfigMap(t, c, "drv-w", maxPodsConfig(75))
		mid, last := names[1], names[2]
		lastBefore := assigned(t, last)
		base := kubeletStarts()
		// mid's apply of drv-z stays in progress, held after its kubelet
		// restart, until the operator's assignment is in.
		hold(t, mid)
		bg := startDKCBackground(t, c, "rollout", "start", "--config", "drv-z", "--all", "--name", "manual-inprogress",
			"--max-unavailable", "1", "--wait", "--timeout", "90s")
		bg.waitForLine(t, 2*time.Minute, func(l string) bool { return l == "rollout/manual-inprogress node/"+mid+" InProgress wave=1" })
		waitHeld(t, mid)
		if src := assigned(t, mid); !framework.IsConfigMap(src, "drv-z") {
			t.Fatalf("node %s held in its restart is assigned %s, want drv-z", mid, rollout.DescribeTarget(src))
		}
		assignedAt := time.Now()
		mustDKC(t, c, "", "assign", mid, "--config", "drv-w")
		release(t, mid)

		code := bg.wait(t, 2*time.Minute)
		t.Logf("the driver exited %d, %s after the manual assignment", code, time.Since(assignedAt).Round(time.Millisecond))
		ro := rolloutObject(t, c, "manual-inprogress")
		ns := ro.NodeStatus(mid)
		t.Logf("rollout %s, reason %q; node %s: phase %s, error %q", ro.Status.State, ro.Status.Reason, mid, ns.Phase, ns.Error)
		if code != 2 {
			t.Errorf("rollout start --wait: exit %d, want 2 (halted on node/%s assigned kube-system/drv-w by hand); stdout:\n%s\nstderr:\n%s",
				code, mid, strings.Join(bg.stop(t), "\n"), bg.stderr())
		}
		if ro.Status.State != rollout.Halted || !strings.HasPrefix(ro.Status.Reason, "node/"+mid+": ") || !strings.Contains(ro.Status.Reason, "kube-system/drv-w") {
			t.Errorf("state %s, reason %q; want Halted, with a reason naming node/%s and kube-system/drv-w", ro.Status.State, ro.Status.Reason, mid)
		}
		if ns.Phase == rollout.Succeeded {
			t.Errorf("node %s counted Done for drv-z while it is assigned drv-w", mid)
		}
		// The operator's assignment stands, and its agent applied it.
		eventuallyStatus(t, c, mid, time.Minute, Active("drv-w"), NoError())
		if d := restarts(base, last); d != 0 || !source.Equal(assigned(t, last), lastBefore) {
			t.Errorf("node %s: kubelet started %d times and assigned %s; want untouched (0, %s)", last, d,
				rollout.DescribeTarget(assigned(t, last)), rollout.DescribeTarget(lastBefore))
		}

		// Another driver must not overwrite the operator either.
		r := dkc(t, c, "", "rollout", "resume", "manual-inprogress", "--wait", "--timeout", "90s")
		if src := assigned(t, mid); !framework.IsConfigMap(src, "drv-w") {
			t.Errorf("after rollout resume node %s is assigned %s: the operator's kube-system/drv-w was overwritten", mid, rollout.DescribeTarget(src))
		}
		if r.ExitCode == 0 {
			t.Errorf("rollout resume: exit 0 on a rollout whose node %s was re-assigned by hand; want it refused", mid)
		}
	})

	t.Run("node relabelled out of the selector while InProgress: it still counts against the budget and finishes", func(t *testing.T) {
		createConfigMap(t, c, "drv-s", maxPodsConfig(76))
		const label = "dkc-test/group"
		setLabel := func(t *testing.T, node string, value *string) {
			t.Helper()
			patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]*string{label: value}}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for _, n := range names {
			setLabel(t, n, ptr.To("a"))
		}
		first := names[0]
		base := kubeletStarts()
		// The canary's apply stays in progress, held after its kubelet
		// restart, while it leaves the selector.
		hold(t, first)
		bg := startDKCBackground(t, c, "rollout", "start", "--config", "drv-s", "-l", label+"=a", "--name", "leaves",
			"--max-unavailable", "1", "--wait", "--timeout", "3m")
		bg.waitForLine(t, 2*time.Minute, func(l string) bool { return l == "rollout/leaves node/"+first+" InProgress wave=0" })
		waitHeld(t, first)
		setLabel(t, first, nil)
		// A driver that lost sight of the canary would start the next
		// node at once: the budget of one is the canary's.
		consistently(t, 5*time.Second, "no other node assigned while the canary applies", func() bool {
			for _, n := range names[1:] {
				if framework.IsConfigMap(assigned(t, n), "drv-s") {
					return false
				}
			}
			return true
		})
		if st := rolloutObject(t, c, "leaves").NodeStatus(first); st.Phase != rollout.InProgress {
			t.Errorf("rollout status shows node %s (out of the selector, held in its apply) %+v, want InProgress", first, st)
		}
		release(t, first)
		if code := bg.wait(t, 3*time.Minute); code != 0 {
			t.Fatalf("rollout start --wait: exit %d, want 0; stdout:\n%s\nstderr:\n%s", code, strings.Join(bg.stop(t), "\n"), bg.stderr())
		}
		ro := rolloutObject(t, c, "leaves")
		if ro.Status.State != rollout.Done {
			t.Fatalf("state %s, want Done", ro.Status.State)
		}
		for _, n := range names {
			if ph := ro.NodeStatus(n).Phase; ph != rollout.Succeeded {
				t.Errorf("node %s: phase %s, want Done", n, ph)
			}
			eventuallyStatus(t, c, n, 10*time.Second, Active("drv-s"), NoError())
			if d := restarts(base, n); d != 1 {
				t.Errorf("node %s: kubelet started %d times, want 1", n, d)
			}
		}
	})
}
