package rollout

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// podOn is a Ready pod of namespace ns on node n1 with labels app=app,
// probed when probed.
func podOn(ns, name, app string, probed bool) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		}},
	}
	if probed {
		p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{}
	}
	return p
}

func budget(ns, name, app string, allowed int32) policyv1.PodDisruptionBudget {
	return policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &intstr.IntOrString{IntVal: 1},
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		},
		Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: allowed},
	}
}

func TestRestartBudgets(t *testing.T) {
	notReady := podOn("ns", "web-0", "web", true)
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	deleting := podOn("ns", "web-0", "web", true)
	deleting.DeletionTimestamp = &metav1.Time{}
	sidecar := podOn("ns", "web-0", "web", false)
	sidecar.Spec.InitContainers = []corev1.Container{{Name: "proxy", ReadinessProbe: &corev1.Probe{}}}
	stale := budget("ns", "web", "web", 1)
	stale.Generation = 2
	emptySelector := budget("ns", "all", "", 0)
	emptySelector.Spec.Selector = &metav1.LabelSelector{}
	noSelector := budget("ns", "none", "", 0)
	noSelector.Spec.Selector = nil

	tests := map[string]struct {
		pods       []corev1.Pod
		pdbs       []policyv1.PodDisruptionBudget
		claimed    map[string]int
		wantWait   RestartWait
		wantCovers []string
	}{
		"no pods": {
			pdbs: []policyv1.PodDisruptionBudget{budget("ns", "web", "web", 0)},
		},
		"a budget that allows a disruption is claimed": {
			pods:       []corev1.Pod{podOn("ns", "web-0", "web", true)},
			pdbs:       []policyv1.PodDisruptionBudget{budget("ns", "web", "web", 1), budget("ns", "db", "db", 0)},
			wantCovers: []string{"ns/web"},
		},
		"a budget that allows none waits": {
			pods:     []corev1.Pod{podOn("ns", "web-0", "web", true)},
			pdbs:     []policyv1.PodDisruptionBudget{budget("ns", "web", "web", 0)},
			wantWait: RestartWait{Pod: "ns/web-0", PDB: "ns/web"},
		},
		"another node's claim counts": {
			pods:     []corev1.Pod{podOn("ns", "web-0", "web", true)},
			pdbs:     []policyv1.PodDisruptionBudget{budget("ns", "web", "web", 1)},
			claimed:  map[string]int{"ns/web": 1},
			wantWait: RestartWait{Pod: "ns/web-0", PDB: "ns/web"},
		},
		"a claim on another budget does not": {
			pods:       []corev1.Pod{podOn("ns", "web-0", "web", true)},
			pdbs:       []policyv1.PodDisruptionBudget{budget("ns", "web", "web", 1)},
			claimed:    map[string]int{"ns/db": 3},
			wantCovers: []string{"ns/web"},
		},
		"a budget whose status is not current waits": {
			pods:     []corev1.Pod{podOn("ns", "web-0", "web", true)},
			pdbs:     []policyv1.PodDisruptionBudget{stale},
			wantWait: RestartWait{Pod: "ns/web-0", PDB: "ns/web"},
		},
		"a pod without a readiness probe does not count": {
			pods: []corev1.Pod{podOn("ns", "web-0", "web", false)},
			pdbs: []policyv1.PodDisruptionBudget{budget("ns", "web", "web", 0)},
		},
		"a sidecar's readiness probe counts": {
			pods:     []corev1.Pod{sidecar},
			pdbs:     []policyv1.PodDisruptionBudget{budget("ns", "web", "web", 0)},
			wantWait: RestartWait{Pod: "ns/web-0", PDB: "ns/web"},
		},
		"a pod already unready does not count": {
			pods: []corev1.Pod{notReady},
			pdbs: []policyv1.PodDisruptionBudget{budget("ns", "web", "web", 0)},
		},
		"a pod being deleted does not count": {
			pods: []corev1.Pod{deleting},
			pdbs: []policyv1.PodDisruptionBudget{budget("ns", "web", "web", 0)},
		},
		"a budget of another namespace does not cover": {
			pods:       []corev1.Pod{podOn("ns", "web-0", "web", true)},
			pdbs:       []policyv1.PodDisruptionBudget{budget("other", "web", "web", 0)},
			wantCovers: nil,
		},
		"an empty selector covers the namespace, a missing one nothing": {
			pods:     []corev1.Pod{podOn("ns", "web-0", "web", true)},
			pdbs:     []policyv1.PodDisruptionBudget{noSelector, emptySelector},
			wantWait: RestartWait{Pod: "ns/web-0", PDB: "ns/all"},
		},
		"the first blocked pod, by name, is named": {
			pods:     []corev1.Pod{podOn("ns", "web-1", "web", true), podOn("ns", "db-0", "db", true), podOn("ns", "web-0", "web", true)},
			pdbs:     []policyv1.PodDisruptionBudget{budget("ns", "web", "web", 0), budget("ns", "db", "db", 1)},
			wantWait: RestartWait{Pod: "ns/web-0", PDB: "ns/web"},
		},
		"every covering budget is claimed": {
			pods:       []corev1.Pod{podOn("ns", "web-1", "web", true), podOn("ns", "db-0", "db", true), podOn("ns", "web-0", "web", true)},
			pdbs:       []policyv1.PodDisruptionBudget{budget("ns", "web", "web", 1), budget("ns", "db", "db", 1)},
			wantCovers: []string{"ns/db", "ns/web"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w, covers := RestartBudgets(tc.pods, tc.pdbs, tc.claimed)
			if diff := cmp.Diff(tc.wantWait, w); diff != "" {
				t.Errorf("wait (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCovers, covers); diff != "" {
				t.Errorf("covers (-want +got):\n%s", diff)
			}
		})
	}
}

// refuse429 is the apiserver's answer to an eviction that budget name
// refuses.
func refuse429(name string) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type:    policyv1.DisruptionBudgetCause,
		Message: "The disruption budget " + name + " needs 2 healthy pods and has 2 currently",
	})
	return err
}

// TestEvictionClientReportsRefusals: the evictions a budget refuses are
// reported with the budget, once per change, and cleared when they go
// through.
func TestEvictionClientReportsRefusals(t *testing.T) {
	client := fake.NewClientset()
	answers := map[string][]error{
		"web-0": {refuse429("web"), refuse429("web"), nil},
		"db-0":  {apierrors.NewTooManyRequests("slow down", 1), nil},
	}
	client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		name := action.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction).Name
		err := answers[name][0]
		answers[name] = answers[name][1:]
		return true, nil, err
	})
	var got []Blocked
	r := &refusals{report: func(b Blocked) { got = append(got, b) }, byPod: map[string]string{}}
	c := evictionClient{Interface: client, refusals: r}
	for _, pod := range []string{"web-0", "web-0", "db-0", "db-0", "web-0"} {
		_ = c.PolicyV1().Evictions("ns").Evict(context.Background(), &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: pod}})
	}
	want := []Blocked{{Pod: "ns/web-0", PDB: "ns/web"}, {}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reported (-want +got):\n%s", diff)
	}
	if got, want := (Blocked{Pod: "ns/web-0", PDB: "ns/web"}).String(), "eviction of pod ns/web-0 blocked by PodDisruptionBudget ns/web"; got != want {
		t.Errorf("Blocked.String() = %q, want %q", got, want)
	}
}

// blockingDrainer reports a blocked eviction, several times as the drain
// library retries it, and holds the drain until release closes; it fails
// when fail is set.
type blockingDrainer struct {
	release chan struct{}
	fail    bool
}

func (d *blockingDrainer) Drain(ctx context.Context, name string, blocked func(Blocked)) error {
	for range 5 {
		blocked(Blocked{Pod: "ns/web-0", PDB: "ns/web"})
	}
	select {
	case <-d.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	if d.fail {
		return errors.New(`drain node "` + name + `": eviction of pod ns/web-0 blocked by PodDisruptionBudget ns/web: global timeout reached: 20s`)
	}
	blocked(Blocked{})
	return nil
}

// statusWrites counts the writes of the rollout's status whose reason
// contains what.
func statusWrites(store *Store, what string) int {
	n := 0
	for _, a := range store.Client.(interface{ Actions() []k8stesting.Action }).Actions() {
		u, ok := a.(k8stesting.UpdateAction)
		if !ok || a.GetSubresource() != "status" {
			continue
		}
		obj, ok := u.GetObject().(*unstructured.Unstructured)
		if !ok {
			continue
		}
		if reason, _, _ := unstructured.NestedString(obj.Object, "status", "reason"); strings.Contains(reason, what) {
			n++
		}
	}
	return n
}

// waitReason waits until the stored rollout's reason is want.
func waitReason(ctx context.Context, t *testing.T, store *Store, want string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		r, err := store.Get(ctx, "r1")
		if err != nil {
			return false, err
		}
		last = r.Status.Reason
		return last == want, nil
	})
	if err != nil {
		t.Fatalf("reason %q, want %q: %v", last, want, err)
	}
}

// TestRunSaysWhichBudgetBlocksADrain: while a drain waits on a budget, the
// rollout's reason names the node, the pod and the budget, written once
// however often the eviction is retried, and cleared once the node is
// drained.
func TestRunSaysWhichBudgetBlocksADrain(t *testing.T) {
	client, names := newFleet(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	agents := newAgents(client, 10*time.Millisecond)
	agents.run(ctx, t)
	store := startRollout(t, client, Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(1), Drain: names})
	d := &blockingDrainer{release: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		r, err := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond, Drainer: d})
		if err == nil && r.Status.State != Done {
			err = errors.New("state " + string(r.Status.State))
		}
		done <- err
	}()
	want := "node/n1: draining: eviction of pod ns/web-0 blocked by PodDisruptionBudget ns/web"
	waitReason(ctx, t, store, want)
	close(d.release)
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	r, err := store.Get(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status.Reason != "" {
		t.Errorf("reason %q once the drain is over, want none", r.Status.Reason)
	}
	if n := statusWrites(store, "blocked by PodDisruptionBudget"); n != 1 {
		t.Errorf("%d status writes named the budget, want 1", n)
	}
}

// TestRunHaltsOnADrainThatTimesOut: a drain that ends blocked (its
// timeout) halts the rollout with the budget named, uncordons the node
// and leaves its assignment as it was.
func TestRunHaltsOnADrainThatTimesOut(t *testing.T) {
	client, names := newFleet(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	assign(ctx, t, client, "n1", cm("old"))
	store := startRollout(t, client, Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(1), Drain: names})
	d := &blockingDrainer{release: make(chan struct{}), fail: true}
	close(d.release)
	r, err := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond, Drainer: d})
	if !errors.Is(err, ErrHalted) {
		t.Fatalf("Run: %v, want halted", err)
	}
	if want := `node/n1: drain node "n1": eviction of pod ns/web-0 blocked by PodDisruptionBudget ns/web: global timeout reached: 20s`; r.Status.Reason != want {
		t.Errorf("reason %q, want %q", r.Status.Reason, want)
	}
	node, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if src, _, _ := source.Assigned(node); node.Spec.Unschedulable || !source.Equal(src, cm("old")) {
		t.Errorf("n1: unschedulable %v, assigned %s; want it uncordoned and still assigned the old config", node.Spec.Unschedulable, DescribeTarget(src))
	}
}

// oldKubeletFleet is a fleet of one node, n1, whose kubelet is version,
// running a probed Ready pod that budget ns/web covers, which allows
// allowed disruptions.
func oldKubeletFleet(t *testing.T, version string, allowed int32) *fake.Clientset {
	t.Helper()
	client, _ := newFleet(t, 1)
	ctx := context.Background()
	node, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.NodeInfo.KubeletVersion = version
	if _, err := client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := podOn("ns", "web-0", "web", true)
	if _, err := client.CoreV1().Pods("ns").Create(ctx, &pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pdb := budget("ns", "web", "web", allowed)
	if _, err := client.PolicyV1().PodDisruptionBudgets("ns").Create(ctx, &pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return client
}

func setBudgetPoll(t *testing.T, d time.Duration) {
	old := budgetPoll
	budgetPoll = d
	t.Cleanup(func() { budgetPoll = old })
}

// setBackPoll sets backPoll to d for t.
func setBackPoll(t *testing.T, d time.Duration) {
	old := backPoll
	backPoll = d
	t.Cleanup(func() { backPoll = old })
}

// TestRunWaitsForBudgetsBeforeRestartingAnOldKubelet: a 1.34 node is
// assigned only once the budget of its probed pod allows a disruption,
// and status says what it waits for meanwhile.
func TestRunWaitsForBudgetsBeforeRestartingAnOldKubelet(t *testing.T) {
	setBudgetPoll(t, 20*time.Millisecond)
	client := oldKubeletFleet(t, "v1.34.12", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	agents := newAgents(client, 10*time.Millisecond)
	agents.run(ctx, t)
	store := startRollout(t, client, Spec{Config: cm("good"), Nodes: []string{"n1"}, MaxUnavailable: intstr.FromInt32(1)})
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond})
		done <- err
	}()
	waitReason(ctx, t, store, "node/n1: waiting for PodDisruptionBudget ns/web (pod ns/web-0) before restarting the kubelet")
	node, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if src, _, _ := source.Assigned(node); src != nil {
		t.Fatalf("n1 assigned %s while its budget allows no disruption", DescribeTarget(src))
	}
	pdb := budget("ns", "web", "web", 1)
	if _, err := client.PolicyV1().PodDisruptionBudgets("ns").UpdateStatus(ctx, &pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r, _ := store.Get(ctx, "r1"); r.Status.Reason != "" {
		t.Errorf("reason %q once the node restarted, want none", r.Status.Reason)
	}
}

// TestRunDoesNotWaitForBudgetsOnNewKubelets: from 1.35 on a restart keeps
// the pods' readiness, and a budget that allows nothing does not hold it.
func TestRunDoesNotWaitForBudgetsOnNewKubelets(t *testing.T) {
	setBudgetPoll(t, 20*time.Millisecond)
	client := oldKubeletFleet(t, "v1.35.0", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	agents := newAgents(client, 10*time.Millisecond)
	agents.run(ctx, t)
	store := startRollout(t, client, Spec{Config: cm("good"), Nodes: []string{"n1"}, MaxUnavailable: intstr.FromInt32(1),
		DrainOptions: DrainSpec{Timeout: metav1.Duration{Duration: time.Second}}})
	if r, err := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond}); err != nil || r.Status.State != Done {
		t.Fatalf("Run: %v, state %s; want done at once", err, r.Status.State)
	}
}

// TestRunHaltsWhenBudgetsNeverAllowTheRestart: a budget that allows no
// disruption for the whole drain timeout halts the rollout with that
// cause, and the node keeps its config.
func TestRunHaltsWhenBudgetsNeverAllowTheRestart(t *testing.T) {
	setBudgetPoll(t, 20*time.Millisecond)
	client := oldKubeletFleet(t, "v1.34.0", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store := startRollout(t, client, Spec{Config: cm("good"), Nodes: []string{"n1"}, MaxUnavailable: intstr.FromInt32(1),
		DrainOptions: DrainSpec{Timeout: metav1.Duration{Duration: 200 * time.Millisecond}}})
	r, err := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond})
	if !errors.Is(err, ErrHalted) {
		t.Fatalf("Run: %v, want halted", err)
	}
	want := "node/n1: wait for PodDisruptionBudget ns/web (pod ns/web-0) before restarting the kubelet: it allowed no disruption within 200ms; the node keeps its config"
	if r.Status.Reason != want {
		t.Errorf("reason %q, want %q", r.Status.Reason, want)
	}
	node, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if src, _, _ := source.Assigned(node); src != nil {
		t.Errorf("n1 assigned %s after the wait for its budget failed", DescribeTarget(src))
	}
}

// TestClaimsHoldUntilTheNodeIsBack: two old nodes whose pods one budget
// covers, which allows one disruption, restart one after the other even
// with room for both in the budget: the first one's claim holds until it
// is back.
func TestClaimsHoldUntilTheNodeIsBack(t *testing.T) {
	setBudgetPoll(t, 20*time.Millisecond)
	client, names := newFleet(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range names {
		node, _ := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		node.Status.NodeInfo.KubeletVersion = "v1.34.0"
		if _, err := client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := podOn("ns", "web-"+n, "web", true)
		pod.Spec.NodeName = n
		if _, err := client.CoreV1().Pods("ns").Create(ctx, &pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pdb := budget("ns", "web", "web", 1)
	if _, err := client.PolicyV1().PodDisruptionBudgets("ns").Create(ctx, &pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	agents := newAgents(client, 300*time.Millisecond)
	agents.run(ctx, t)
	store := startRollout(t, client, Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(2)})
	if _, err := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	agents.checkBudgetAndOnce(t, names, 1)
}

// roomDrainer drains node wait only once node room is uncordoned, within
// 3s, as a drain does whose evicted pods can go nowhere else while room is
// cordoned and whose budget allows no disruption before they are Ready.
type roomDrainer struct {
	client     *fake.Clientset
	wait, room string
}

func (d *roomDrainer) Drain(ctx context.Context, name string, blocked func(Blocked)) error {
	if name != d.wait {
		return nil
	}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 3*time.Second, true, func(ctx context.Context) (bool, error) {
		node, err := d.client.CoreV1().Nodes().Get(ctx, d.room, metav1.GetOptions{})
		return err == nil && !node.Spec.Unschedulable, nil
	})
	if err != nil {
		return errors.New("drain " + name + ": " + d.room + " still cordoned")
	}
	return nil
}

// TestRunUncordonsADrainedNodeOnceBackWhileOthersDrain: with room for two
// nodes at once, the drain of n2 waits for n1 to be uncordoned (its pods'
// only place); n1 is uncordoned once it is back, while n2 still drains,
// not at the next pass, which comes only once n2 is drained.
func TestRunUncordonsADrainedNodeOnceBackWhileOthersDrain(t *testing.T) {
	setBackPoll(t, 10*time.Millisecond)
	client, names := newFleet(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	agents := newAgents(client, 10*time.Millisecond)
	agents.run(ctx, t)
	store := startRollout(t, client, Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(2), Drain: names})
	d := &roomDrainer{client: client, wait: "n2", room: "n1"}
	r, err := Run(ctx, client, store, "r1", Options{Resync: 50 * time.Millisecond, Drainer: d})
	if err != nil || r.Status.State != Done {
		t.Fatalf("Run: %v, state %s, reason %q; want done", err, r.Status.State, r.Status.Reason)
	}
	for _, n := range names {
		if node, _ := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{}); node.Spec.Unschedulable {
			t.Errorf("node %s still cordoned", n)
		}
	}
}
