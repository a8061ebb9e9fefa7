package e2e

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dkc/dkc/pkg/pool"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// TestKubeadmStartupTaint: nodes configured before workloads land. dkc is
// installed from deploy/ on a first kubeadm node, with a pool that selects
// the nodes labelled dkc-e2e/pool=joiners and a Deployment whose pods fit
// only there, Pending for want of room. Then a node is `kubeadm join`ed
// with that label and dkc's startup taint (the JoinConfiguration's
// nodeRegistration.taints, as docs/install.md shows): the controller
// assigns it the pool's current revision at once, with no rollout, its
// agent applies it (one kubelet restart) and removes the taint once the
// config passed its health gate, and only then does the scheduler place
// the pods there. A node that joins with the taint and that no pool
// selects has it removed by the controller at once, its kubelet untouched.
func TestKubeadmStartupTaint(t *testing.T) {
	c, _, first := kubeadmDKC(t, "dkc-taint-first")
	ctx := context.Background()
	t.Cleanup(func() {
		if t.Failed() {
			logPods(t, c, "app.kubernetes.io/name=dkc-controller")
			logPods(t, c, "app.kubernetes.io/name=dkc-agent")
		}
	})

	// The pool's config: the node's own (kubeadm's, the same on every
	// node it joins) with another maxPods.
	local, err := os.ReadFile(first.Path("/var/lib/kubelet/config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	createConfigMap(t, c, "taint-p", framework.ConfigWith(t, local, func(cfg map[string]any) { cfg["maxPods"] = 57 }))
	kubectl(t, c, `apiVersion: kubectl-dkc.io/v1alpha1
kind: NodeConfigPool
metadata:
  name: joiners
  namespace: kube-system
spec:
  nodeSelector:
    matchLabels:
      dkc-e2e/pool: joiners
  configSource:
    configMap: {namespace: kube-system, name: taint-p, kubeletConfigKey: kubelet}
`, "apply", "--server-side", "-f", "-")

	// The workload waits for room: its pods fit only on a joiner.
	labels := map[string]string{"app": "waiting"}
	_, err = c.Client.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "waiting"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"dkc-e2e/pool": "joiners"},
					Containers:   []corev1.Container{{Name: "pause", Image: c.PauseImage()}},
				},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the Deployment's two pods, Pending", func() bool {
		pods, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=waiting"})
		if err != nil || len(pods.Items) != 2 {
			return false
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending {
				return false
			}
		}
		return true
	})

	const joiner = "dkc-taint-joiner"
	// What the joiner was when each pod was bound to it, seen from a
	// watch of the pods that runs from before the join.
	var (
		mu     sync.Mutex
		atBind []*corev1.Node
	)
	w, err := c.Client.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: "app=waiting"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	go func() {
		seen := map[string]bool{}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted || p.Spec.NodeName != joiner || seen[p.Name] {
				continue
			}
			seen[p.Name] = true
			n, err := c.Client.CoreV1().Nodes().Get(ctx, joiner, metav1.GetOptions{})
			if err != nil {
				t.Errorf("get node %s when pod %s was bound to it: %v", joiner, p.Name, err)
				continue
			}
			mu.Lock()
			atBind = append(atBind, n)
			mu.Unlock()
		}
	}()
	// The kubelet's starts when its Node appeared: the start that
	// registered it, before any agent could restart it.
	registered := make(chan int, 1)
	nw, err := c.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", joiner).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer nw.Stop()
	go func() {
		for ev := range nw.ResultChan() {
			if ev.Type != watch.Added {
				continue
			}
			starts, err := c.KubeadmKubeletStarts(joiner)
			if err != nil {
				t.Errorf("count %s's kubelet starts: %v", joiner, err)
			}
			if n, ok := ev.Object.(*corev1.Node); !ok || !source.Pending(n) {
				t.Errorf("node %s registered without the startup taint: %+v", joiner, ev.Object)
			}
			registered <- starts
			return
		}
	}()

	startup := corev1.Taint{Key: source.StartupTaint, Effect: corev1.TaintEffectNoSchedule}
	began := time.Now()
	joined, err := c.StartKubeadmNodeWith(ctx, joiner, framework.KubeadmNodeOptions{
		Taints:           []corev1.Taint{startup},
		KubeletExtraArgs: map[string]string{"node-labels": "dkc-e2e/pool=joiners"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var before int
	select {
	case before = <-registered:
	case <-time.After(time.Minute):
		t.Fatal("no ADDED event of the joining node")
	}
	t.Logf("%s joined and Ready in %s; %d kubelet start(s) when it registered", joiner, time.Since(began).Round(time.Millisecond), before)

	t.Run("the joining node gets the pool's config at once, outside any rollout, and only then takes pods", func(t *testing.T) {
		eventuallyStatus(t, c, joiner, 3*time.Minute, Active("taint-p"), NoError())
		waitFor(t, time.Minute, "the startup taint removed", func() bool {
			n, err := c.Client.CoreV1().Nodes().Get(ctx, joiner, metav1.GetOptions{})
			return err == nil && !source.Pending(n)
		})
		t.Logf("config active and taint removed %s after the join began", time.Since(began).Round(time.Millisecond))
		waitFor(t, 2*time.Minute, "the Deployment's pods Running on "+joiner, func() bool {
			pods, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=waiting"})
			if err != nil || len(pods.Items) != 2 {
				return false
			}
			for _, p := range pods.Items {
				if p.Spec.NodeName != joiner || p.Status.Phase != corev1.PodRunning {
					return false
				}
			}
			return true
		})
		mu.Lock()
		seen := append([]*corev1.Node(nil), atBind...)
		mu.Unlock()
		if len(seen) != 2 {
			t.Fatalf("the pods' watch saw %d bindings to %s, want 2", len(seen), joiner)
		}
		for _, n := range seen {
			st, _, err := source.Status(n)
			if err != nil || st == nil || st.Active == nil || st.Active.ConfigMap == nil || st.Active.ConfigMap.Name != "taint-p" || st.Error != "" {
				t.Errorf("a pod was bound to %s while its status was %+v (err %v), want taint-p active", joiner, st, err)
			}
			if source.Pending(n) {
				t.Errorf("a pod was bound to %s while it had the startup taint", joiner)
			}
		}
		if got := configz(t, c, joiner)["maxPods"]; got != float64(57) {
			t.Errorf("%s: configz maxPods %v, want 57", joiner, got)
		}
		// Outside the pool's budget: no rollout assigned it.
		list := kubectl(t, c, "", "get", "nodeconfigrollouts", "-n", "kube-system", "-l", pool.Label+"=joiners", "-o", "name")
		if strings.TrimSpace(list) != "" {
			t.Errorf("the pool created rollouts for a joining node: %s", list)
		}
	})

	t.Run("its kubelet restarted once", func(t *testing.T) {
		if before < 1 {
			t.Fatalf("%d kubelet starts when the node registered, want at least 1", before)
		}
		starts := func() int {
			n, err := joined.KubeletStarts()
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		pid := func() int {
			p, _ := joined.KubeletMainPID()
			return p
		}
		if got := starts(); got != before+1 {
			t.Errorf("%d kubelet starts after the config was active, %d when the node registered: want one restart", got, before)
		}
		consistentlyNoRestart(t, "the config passed its gate and the taint was removed", 5*time.Second, pid, starts)
	})

	t.Run("a joining node that no pool selects has the taint removed at once, its kubelet untouched", func(t *testing.T) {
		n, err := c.StartKubeadmNodeWith(ctx, "dkc-taint-nopool", framework.KubeadmNodeOptions{Taints: []corev1.Taint{startup}})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, "the startup taint removed from "+n.Name, func() bool {
			node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			return err == nil && !source.Pending(node)
		})
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if src, _, _ := source.Assigned(node); src != nil {
			t.Errorf("%s was assigned %+v; no pool selects it", n.Name, src)
		}
		if got, _ := n.KubeletStarts(); got != 1 {
			t.Errorf("%s: %d kubelet starts, want 1 (kubeadm join's)", n.Name, got)
		}
	})
}
