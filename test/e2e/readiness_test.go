package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/kubectl-dkc/dkc/pkg/agent"
	"github.com/kubectl-dkc/dkc/pkg/nodehealth"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// The probed pod of TestReadinessAcrossApply and its Service, in "default".
const (
	readyzName = "readyz"
	readyzPort = 18080
)

// TestReadinessAcrossApply measures, on a real kubelet, the newest and the
// oldest the tests run, what one apply costs a Service: a hostNetwork pod
// with an HTTP readiness probe (hack/image/probe) runs on the node, selected
// by a ClusterIP Service, and the agent applies a config that needs a
// kubelet restart (maxPods). From before the assign until the pod is Ready
// and in its EndpointSlice again, the test records with its own clock when
// the pod's Ready condition, its endpoint's ready condition and the agent's
// KubeletConfigOK condition changed, and logs the figures in one line per
// kubelet version ("readiness across apply: kubelet=...",
// docs/performance.md).
//
// Kubelets up to 1.34 reset the readiness of every probed container at a
// restart (kubernetes/kubernetes#100277); KEP-4781 keeps it from 1.35 on,
// unless the node's Ready condition flipped. The health gate must not pass
// while the pod is not Ready (wantGateNotBeforePodReady).
func TestReadinessAcrossApply(t *testing.T) {
	for _, tc := range []struct {
		name   string
		binDir func(t *testing.T) string
	}{
		{name: "kubelet v1.37", binDir: func(*testing.T) string { return "" }},
		{name: "kubelet v1.34", binDir: oldKubeletDir},
	} {
		t.Run(tc.name, func(t *testing.T) { testReadinessAcrossApply(t, tc.binDir(t)) })
	}
}

func testReadinessAcrossApply(t *testing.T, kubeletBinDir string) {
	c := framework.Setup(t, framework.Options{Nodes: 1, Pods: true, KubeletBinDir: kubeletBinDir})
	ctx := context.Background()
	n := c.Nodes[0]
	pause, probe := probeImages(t, filepath.Join("..", ".."))
	refs, err := c.PushImages(ctx, filepath.Join("..", ".."), pause, probe)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.StartAgent(framework.DKCBinary(), n.AgentArgs(framework.AgentOptions{
		Kubeconfig:    framework.AgentKubeconfig(t, c),
		HealthTimeout: time.Minute,
		Extra:         []string{"-v=2", "--pod-ready-timeout=20s"},
	})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the agent's first report ("+string(source.ConditionType)+"=True)", func() bool {
		return conditionStatus(getNode(t, c, n.Name), source.ConditionType) == corev1.ConditionTrue
	})
	node := getNode(t, c, n.Name)
	kubelet := node.Status.NodeInfo.KubeletVersion

	createReadyzPod(t, c, n, refs[1])
	tl := recordTimeline(t, c, n)
	waitFor(t, 2*time.Minute, "pod "+readyzName+" Ready and ready in its EndpointSlice", func() bool {
		pod, endpoint := tl.serving()
		return pod && endpoint
	})
	// A kubelet 1.35+ keeps the readiness only of containers that started
	// 10s before it (kubeletRestartGracePeriod): on a real node the pods
	// ran long before the apply.
	waitFor(t, time.Minute, "pod "+readyzName+" running for 15s", func() bool {
		started := containerStarted(readyzPod(t, c))
		return !started.IsZero() && time.Since(started) > 15*time.Second
	})
	pod0 := readyzPod(t, c)

	createConfigMap(t, c, "readyz-maxpods", nodeConfig(t, n, func(cfg map[string]any) { cfg["maxPods"] = 42 }))
	starts := n.KubeletStarts()
	mark := time.Now()
	mustDKC(t, c, "", "assign", n.Name, "--config", "readyz-maxpods", "--wait", "--timeout", "3m")
	assignToActive := time.Since(mark)
	eventuallyStatus(t, c, n.Name, 30*time.Second, Active("readyz-maxpods"), NoError())
	if n.KubeletStarts() == starts {
		t.Fatalf("the kubelet was not restarted (%d starts): nothing was measured", starts)
	}
	// A kubelet before 1.35 sets the container not ready just before its
	// first probe, which comes a random part of the period (10s) after
	// its first pod sync: the pod and its endpoint count as back once
	// they stayed serving for 15s.
	tl.waitServingFor(t, 15*time.Second, 2*time.Minute)
	tl.stop()

	f := tl.figures(mark)
	t.Logf("timeline from the assign:\n%s", tl.describe(mark))
	t.Logf("readiness across apply: kubelet=%s %s assign_to_active_s=%.3f", kubelet, f, assignToActive.Seconds())
	if f.restart.IsZero() {
		t.Errorf("the timeline has no kubelet start after the assign")
	}
	if f.gatePass.IsZero() {
		t.Errorf("the timeline has no %s reason %s or %s after the assign", source.ConditionType, agent.ReasonTrial, agent.ReasonApplied)
	}
	pod := readyzPod(t, c)
	if pod.UID != pod0.UID || restarts(pod) != restarts(pod0) {
		t.Errorf("pod %s: uid %s -> %s, container restarts %d -> %d; a kubelet restart must leave it running",
			readyzName, pod0.UID, pod.UID, restarts(pod0), restarts(pod))
	}
	wantGateNotBeforePodReady(t, f)

	if nodehealth.ResetsReadiness(node) {
		podNotReadyAgainRollsBack(t, c, n)
	}
}

// podNotReadyAgainRollsBack: on a kubelet that resets readiness at a
// restart, a pod that was Ready before the restart and does not become
// Ready again within --pod-ready-timeout fails the gate, and the agent
// rolls back. The pod's endpoint starts failing just before the assign;
// with failureThreshold 3 the pod is still Ready when the agent takes its
// baseline.
func podNotReadyAgainRollsBack(t *testing.T, c *framework.Cluster, n *framework.Node) {
	t.Helper()
	readyzPost := func(path string) {
		t.Helper()
		resp, err := http.Post(fmt.Sprintf("http://%s:%d%s", n.IP, readyzPort, path), "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %s", path, resp.Status)
		}
	}
	createConfigMap(t, c, "readyz-maxpods-43", nodeConfig(t, n, func(cfg map[string]any) { cfg["maxPods"] = 43 }))
	readyzPost("/fail")
	r := dkc(t, c, "", "assign", n.Name, "--config", "readyz-maxpods-43", "--wait", "--timeout", "3m")
	if r.ExitCode != 2 {
		t.Errorf("assign --wait of a config whose pod does not get Ready again: exit %d, want 2; stderr:\n%s", r.ExitCode, r.Stderr)
	}
	st := eventuallyStatus(t, c, n.Name, time.Minute, Assigned("readyz-maxpods-43"), AnyError())
	want := "health gate: after 20s: pod default/" + readyzName + " was Ready before the restart and is not Ready"
	if !strings.Contains(st.Error, want) {
		t.Errorf("status.error = %q, want it to contain %q", st.Error, want)
	}
	// readyz-maxpods is still in its trial: the last-known-good config
	// is the node's local config.
	if st.Active != nil || st.LastKnownGood != nil {
		t.Errorf("active %v, last-known-good %v; want both the local config", st.Active, st.LastKnownGood)
	}
	wantCondition(t, c, n.Name, "False", agent.ReasonRolledBack)
	readyzPost("/ok")
	waitFor(t, time.Minute, "pod "+readyzName+" Ready again", func() bool { return podReady(readyzPod(t, c)) })
}

// wantGateNotBeforePodReady is the health gate's promise to a Service: when
// the restart took the probed pod out of Ready, the agent's gate passed (its
// KubeletConfigOK went to Trial or Applied) no earlier than the pod was
// Ready again. Kubelets from 1.35 on keep readiness across most restarts,
// where this holds trivially. On 1.34 the pod is still Ready right after
// the restart and flips only at its first probe, up to one probe period
// later, so this holds only if the gate waits for the pods' first probes.
func wantGateNotBeforePodReady(t *testing.T, f readinessFigures) {
	t.Helper()
	if len(f.podNotReady) == 0 {
		t.Logf("the pod stayed Ready across the restart: the gate had nothing to wait for")
		return
	}
	last := f.podNotReady[len(f.podNotReady)-1]
	switch {
	case last.to.IsZero():
		t.Errorf("the pod was not Ready again by the end of the timeline, yet the gate passed")
	case f.gatePass.Before(last.to):
		t.Errorf("the gate passed %s before the pod was Ready again (restart +%s: gate passed; +%s: pod Ready again)",
			last.to.Sub(f.gatePass).Round(time.Millisecond), f.gatePass.Sub(f.restart).Round(time.Millisecond),
			last.to.Sub(f.restart).Round(time.Millisecond))
	}
}

// probeImages are the OCI archives of the pause and the probe image: those
// of `make image` when $DKC_PAUSE_IMAGE and $DKC_PROBE_IMAGE name them (make
// e2e does), else built here for this host's platform.
func probeImages(t *testing.T, root string) (pause, probe string) {
	t.Helper()
	pause, probe = os.Getenv("DKC_PAUSE_IMAGE"), os.Getenv("DKC_PROBE_IMAGE")
	dir := t.TempDir()
	var err error
	if pause == "" {
		if pause, err = framework.BuildImage(context.Background(), root, dir, "pause"); err != nil {
			t.Fatal(err)
		}
	}
	if probe == "" {
		if probe, err = framework.BuildImage(context.Background(), root, dir, "probe"); err != nil {
			t.Fatal(err)
		}
	}
	return pause, probe
}

// createReadyzPod creates, in "default", the pod readyz on n: hostNetwork
// (the harness has no CNI), the probe image (image, which n pulls from the
// cluster's registry) serving on n's address, with a
// readiness probe of its /readyz every 10s; and the ClusterIP Service
// readyz that selects it. The ServiceAccount is the test's own, since the
// harness runs no serviceaccount controller.
func createReadyzPod(t *testing.T, c *framework.Cluster, n *framework.Node, image string) {
	t.Helper()
	ctx := context.Background()
	no := false
	labels := map[string]string{"app.kubernetes.io/name": readyzName}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: readyzName}, AutomountServiceAccountToken: &no}
	if _, err := c.Client.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	grace := int64(5)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: readyzName, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:                      n.Name,
			HostNetwork:                   true,
			ServiceAccountName:            readyzName,
			AutomountServiceAccountToken:  &no,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name:  readyzName,
				Image: image,
				Args:  []string{"-listen", fmt.Sprintf("%s:%d", n.IP, readyzPort)},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: readyzPort}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
						Path: "/readyz", Port: intstr.FromInt32(readyzPort),
					}},
					// Kubernetes' default period: a kubelet that resets
					// readiness at its start probes again after a random
					// part of it (prober worker's start jitter).
					PeriodSeconds:    10,
					TimeoutSeconds:   1,
					SuccessThreshold: 1,
					// Ready for two more periods after its endpoint
					// starts failing: long enough for the rollback case
					// to take its baseline with the pod Ready.
					FailureThreshold: 3,
				},
			}},
		},
	}
	if _, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: readyzName},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: readyzPort, TargetPort: intstr.FromString("http")}},
		},
	}
	if _, err := c.Client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func readyzPod(t *testing.T, c *framework.Cluster) *corev1.Pod {
	t.Helper()
	pod, err := c.Client.CoreV1().Pods("default").Get(context.Background(), readyzName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// containerStarted is when pod's container started running, or zero.
func containerStarted(pod *corev1.Pod) time.Time {
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Running != nil {
			return s.State.Running.StartedAt.Time
		}
	}
	return time.Time{}
}

func restarts(pod *corev1.Pod) int32 {
	var n int32
	for _, s := range pod.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

// Signals of a timeline.
const (
	signalPodReady      = "pod Ready"
	signalEndpointReady = "endpoint ready"
	signalAgent         = string(source.ConditionType)
	signalNodeReady     = "node Ready"
	signalKubeletStarts = "kubelet starts"
)

// timelineEvent is one change of a signal, at the test's clock.
type timelineEvent struct {
	at     time.Time
	signal string
	value  string
}

// timeline records, with the test's clock, every change of what a
// Service's user and an operator see of one node across an apply: the
// readyz pod's Ready condition, its endpoint's ready condition in the
// Service's EndpointSlices (missing counts as not ready), the node's Ready
// condition, the agent's KubeletConfigOK reason, and how often the harness
// started the kubelet.
type timeline struct {
	stopCh chan struct{}
	wg     sync.WaitGroup

	mu     sync.Mutex
	events []timelineEvent
	last   map[string]string
	slices map[string]bool // EndpointSlice name: lists readyz as ready
}

// recordTimeline starts informers on n's Node, the readyz pod and the
// Service's EndpointSlices, and polls n's kubelet starts every 10ms; stop
// ends them, and the cluster's cleanup does if the test fails first.
func recordTimeline(t *testing.T, c *framework.Cluster, n *framework.Node) *timeline {
	t.Helper()
	tl := &timeline{stopCh: make(chan struct{}), last: map[string]string{}, slices: map[string]bool{}}
	t.Cleanup(tl.stop)
	f := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace("default"))
	handle := func(inf cache.SharedIndexInformer, fn func(obj any, deleted bool)) {
		_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { fn(obj, false) },
			UpdateFunc: func(_, obj any) { fn(obj, false) },
			DeleteFunc: func(obj any) {
				if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				fn(obj, true)
			},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	handle(f.Core().V1().Nodes().Informer(), func(obj any, _ bool) {
		node, ok := obj.(*corev1.Node)
		if !ok || node.Name != n.Name {
			return
		}
		for _, cond := range node.Status.Conditions {
			switch cond.Type {
			case source.ConditionType:
				tl.observe(signalAgent, cond.Reason)
			case corev1.NodeReady:
				tl.observe(signalNodeReady, fmt.Sprint(cond.Status == corev1.ConditionTrue))
			}
		}
	})
	handle(f.Core().V1().Pods().Informer(), func(obj any, deleted bool) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Name != readyzName {
			return
		}
		tl.observe(signalPodReady, fmt.Sprint(!deleted && podReady(pod)))
	})
	handle(f.Discovery().V1().EndpointSlices().Informer(), func(obj any, deleted bool) {
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok || s.Labels[discoveryv1.LabelServiceName] != readyzName {
			return
		}
		tl.observeSlice(s.Name, !deleted && listsReady(s, readyzName))
	})
	f.Start(tl.stopCh)
	for typ, ok := range f.WaitForCacheSync(tl.stopCh) {
		if !ok {
			t.Fatalf("informer %v did not sync", typ)
		}
	}
	tl.wg.Add(1)
	go func() {
		defer tl.wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			tl.observe(signalKubeletStarts, fmt.Sprint(n.KubeletStarts()))
			select {
			case <-tl.stopCh:
				return
			case <-tick.C:
			}
		}
	}()
	return tl
}

func conditionStatus(node *corev1.Node, typ corev1.NodeConditionType) corev1.ConditionStatus {
	for _, cond := range node.Status.Conditions {
		if cond.Type == typ {
			return cond.Status
		}
	}
	return ""
}

func podReady(pod *corev1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// listsReady reports whether s has an endpoint of pod name whose ready
// condition is true.
func listsReady(s *discoveryv1.EndpointSlice, name string) bool {
	for _, e := range s.Endpoints {
		if e.TargetRef != nil && e.TargetRef.Kind == "Pod" && e.TargetRef.Name == name && e.Conditions.Ready != nil && *e.Conditions.Ready {
			return true
		}
	}
	return false
}

// observe records value for signal if it changed.
func (tl *timeline) observe(signal, value string) {
	now := time.Now()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.observeLocked(now, signal, value)
}

func (tl *timeline) observeLocked(now time.Time, signal, value string) {
	if old, ok := tl.last[signal]; ok && old == value {
		return
	}
	tl.last[signal] = value
	tl.events = append(tl.events, timelineEvent{at: now, signal: signal, value: value})
}

// observeSlice records whether slice lists the pod as ready; the endpoint
// is ready while any slice does.
func (tl *timeline) observeSlice(slice string, ready bool) {
	now := time.Now()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.slices[slice] = ready
	ready = false
	for _, r := range tl.slices {
		ready = ready || r
	}
	tl.observeLocked(now, signalEndpointReady, fmt.Sprint(ready))
}

// serving reports whether the pod is Ready and its endpoint ready now.
func (tl *timeline) serving() (pod, endpoint bool) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.last[signalPodReady] == "true", tl.last[signalEndpointReady] == "true"
}

// waitServingFor waits until the pod and its endpoint have been serving
// for d without a change, counted from the call at the earliest, for at
// most timeout.
func (tl *timeline) waitServingFor(t *testing.T, d, timeout time.Duration) {
	t.Helper()
	called := time.Now()
	waitFor(t, timeout, fmt.Sprintf("pod %s Ready and ready in its EndpointSlice for %s", readyzName, d), func() bool {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		if tl.last[signalPodReady] != "true" || tl.last[signalEndpointReady] != "true" {
			return false
		}
		since := called
		for _, e := range tl.events {
			if (e.signal == signalPodReady || e.signal == signalEndpointReady) && e.at.After(since) {
				since = e.at
			}
		}
		return time.Since(since) >= d
	})
}

// stop ends the recording; it is safe to call more than once.
func (tl *timeline) stop() {
	tl.mu.Lock()
	select {
	case <-tl.stopCh:
		tl.mu.Unlock()
		return
	default:
		close(tl.stopCh)
	}
	tl.mu.Unlock()
	tl.wg.Wait()
}

// describe lists the events from mark on, as offsets from mark.
func (tl *timeline) describe(mark time.Time) string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var b strings.Builder
	for _, e := range tl.events {
		if !e.at.Before(mark) {
			fmt.Fprintf(&b, "  +%-9s %s = %s\n", e.at.Sub(mark).Round(time.Millisecond), e.signal, e.value)
		}
	}
	return b.String()
}

// interval is a span in which a signal was false; to is zero while it
// still is.
type interval struct{ from, to time.Time }

func (i interval) length(end time.Time) time.Duration {
	if i.to.IsZero() {
		return end.Sub(i.from)
	}
	return i.to.Sub(i.from)
}

// readinessFigures are what a timeline shows from the assign (mark) on.
type readinessFigures struct {
	// restart is the kubelet's first start after mark.
	restart time.Time
	// gatePass is when KubeletConfigOK first turned Trial or Applied after
	// mark: the health gate passed.
	gatePass time.Time
	// podNotReady, endpointOut and nodeNotReady are the spans in which
	// the pod was not Ready, its endpoint not ready or missing, and the
	// node not Ready.
	podNotReady, endpointOut, nodeNotReady []interval
	// end is the last event's time.
	end time.Time
}

func (tl *timeline) figures(mark time.Time) readinessFigures {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	events := append([]timelineEvent(nil), tl.events...)
	sort.SliceStable(events, func(i, j int) bool { return events[i].at.Before(events[j].at) })
	var f readinessFigures
	starts := ""
	for _, e := range events {
		if e.signal == signalKubeletStarts && e.at.Before(mark) {
			starts = e.value
		}
	}
	for _, e := range events {
		f.end = e.at
		if e.at.Before(mark) {
			continue
		}
		switch e.signal {
		case signalKubeletStarts:
			if f.restart.IsZero() && e.value != starts {
				f.restart = e.at
			}
		case signalAgent:
			if f.gatePass.IsZero() && (e.value == agent.ReasonTrial || e.value == agent.ReasonApplied) {
				f.gatePass = e.at
			}
		case signalPodReady:
			f.podNotReady = toggle(f.podNotReady, e)
		case signalEndpointReady:
			f.endpointOut = toggle(f.endpointOut, e)
		case signalNodeReady:
			f.nodeNotReady = toggle(f.nodeNotReady, e)
		}
	}
	return f
}

// toggle opens an interval at a false e and closes the open one at a true e.
func toggle(spans []interval, e timelineEvent) []interval {
	open := len(spans) > 0 && spans[len(spans)-1].to.IsZero()
	switch {
	case e.value == "false" && !open:
		return append(spans, interval{from: e.at})
	case e.value == "true" && open:
		spans[len(spans)-1].to = e.at
	}
	return spans
}

func total(spans []interval, end time.Time) time.Duration {
	var d time.Duration
	for _, s := range spans {
		d += s.length(end)
	}
	return d
}

// String is the figures as key=value pairs, durations in seconds, a
// negative gate_after_pod_ready_s meaning the gate passed first:
//
//	pod_not_ready_s=0.018 pod_not_ready_spans=1 endpoint_out_s=0.012 endpoint_out_spans=1
//	node_not_ready_s=0.000 restart_to_gate_s=0.584 restart_to_pod_ready_s=6.382 gate_after_pod_ready_s=-5.798
func (f readinessFigures) String() string {
	secs := func(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }
	since := func(from, to time.Time) string {
		if from.IsZero() || to.IsZero() {
			return "NA"
		}
		return secs(to.Sub(from))
	}
	podBack := time.Time{}
	if k := len(f.podNotReady); k > 0 {
		podBack = f.podNotReady[k-1].to
	}
	return fmt.Sprintf("pod_not_ready_s=%s pod_not_ready_spans=%d endpoint_out_s=%s endpoint_out_spans=%d node_not_ready_s=%s restart_to_gate_s=%s restart_to_pod_ready_s=%s gate_after_pod_ready_s=%s",
		secs(total(f.podNotReady, f.end)), len(f.podNotReady), secs(total(f.endpointOut, f.end)), len(f.endpointOut),
		secs(total(f.nodeNotReady, f.end)), since(f.restart, f.gatePass), since(f.restart, podBack), since(podBack, f.gatePass))
}
