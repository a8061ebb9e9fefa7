package bench

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// benchApplies is how many applies BenchmarkAssignToActive measures; set
// DKC_BENCH_APPLIES for more (never fewer than 20).
const benchApplies = 20

// BenchmarkAssignToActive measures, on one real kubelet 1.37 with a dkc
// agent in exec mode, the time from writing an assignment to the moment the
// Node's config status reports it active. The agent reports active while
// its health gate still runs, once the restarted kubelet's configz shows the
// config, and the gate ends with the kubelet's Ready: the table shows the
// kubelet's restart and the whole health gate (from the agent's phase
// histograms), the agent's apply from seeing the assignment to the gate's
// end (APPLY), and the agent's own overhead within it (APPLY less restart
// and gate: download, checkpoint, checks, config write, status reports).
//
// Each run makes a fixed number of applies, alternating between two valid
// ConfigMaps, whatever b.N is; run it with -benchtime=1x (make bench). The
// reported ns/op is the median of the applies.
//
// The assignment is a direct JSON merge patch of the Node's annotation, so
// no CLI start-up is measured; the status is observed through a watch on the
// Node, not by polling.
func BenchmarkAssignToActive(b *testing.B) {
	applies := benchApplies
	if s := os.Getenv("DKC_BENCH_APPLIES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < benchApplies {
			b.Fatalf("DKC_BENCH_APPLIES=%q: want a number of at least %d", s, benchApplies)
		}
		applies = n
	}
	b.StopTimer()
	c := framework.Setup(b, framework.Options{Nodes: 1})
	ctx := context.Background()
	n := c.Nodes[0]

	kubeconfig := framework.AgentKubeconfig(b, c)
	names := []string{"bench-a", "bench-b"}
	for i, name := range names {
		createMaxPodsConfig(ctx, b, c, n, name, 41+i)
	}

	ag, metricsURL := startBenchAgent(b, n, kubeconfig, time.Minute)
	bench := &assignBench{b: b, c: c, node: n.Name, metricsURL: metricsURL}
	// A warm-up apply that is not measured: the first one also moves the
	// kubelet off its local config.
	if _, err := bench.apply(ctx, names[0], 1); err != nil {
		b.Fatalf("warm-up apply: %v; see %s", err, ag.LogPath)
	}

	var results []applyResult
	b.ResetTimer()
	for i := 0; i < applies; i++ {
		name := names[(i+1)%2]
		b.StartTimer()
		r, err := bench.apply(ctx, name, i+2)
		b.StopTimer()
		if err != nil {
			b.Fatalf("apply %d (%s): %v; see %s", i+1, name, err, ag.LogPath)
		}
		results = append(results, r)
		// Let the condition patch and the Event of this apply land before
		// the next one.
		time.Sleep(time.Second)
	}
	if err := ag.Stop(); err != nil {
		b.Fatal(err)
	}

	bench.report(results)
}

// createMaxPodsConfig creates ConfigMap name in kube-system: node n's local
// kubelet config with maxPods set.
func createMaxPodsConfig(ctx context.Context, b *testing.B, c *framework.Cluster, n *framework.Node, name string, maxPods int) {
	b.Helper()
	local, err := os.ReadFile(n.ConfigPath)
	if err != nil {
		b.Fatal(err)
	}
	payload := framework.ConfigWith(b, local, framework.MaxPods(maxPods))
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: source.DefaultNamespace},
		Data:       map[string]string{source.DefaultKey: payload},
	}
	if _, err := c.Client.CoreV1().ConfigMaps(source.DefaultNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
}

// startBenchAgent starts the dkc agent of node n as kubeconfig's user, with
// healthTimeout and no promotion to last-known-good while measuring, and
// returns it and the URL of its /metrics once that answers.
func startBenchAgent(b *testing.B, n *framework.Node, kubeconfig string, healthTimeout time.Duration) (*framework.Agent, string) {
	b.Helper()
	ag, err := n.StartAgent(framework.DKCBinary(), n.AgentArgs(framework.AgentOptions{
		Kubeconfig:    kubeconfig,
		HealthTimeout: healthTimeout,
		TrialDuration: time.Hour,
	}))
	if err != nil {
		b.Fatal(err)
	}
	metricsURL := "http://" + n.IP + ":10390/metrics"
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := framework.HTTPGet(metricsURL); err == nil {
			return ag, metricsURL
		}
		if time.Now().After(deadline) {
			b.Fatalf("agent /metrics did not answer within 30s; see %s", ag.LogPath)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// assignBench makes one apply at a time and measures it.
type assignBench struct {
	b          *testing.B
	c          *framework.Cluster
	node       string
	metricsURL string
	// carrier holds the assignment; default the annotation.
	carrier source.Carrier
}

// applyResult is what one apply took.
type applyResult struct {
	config string
	// total: assignment patch written to status active seen by the watch.
	total time.Duration
	// phases: the deltas of the agent's phase histograms' sums.
	restart, probe, validate, write time.Duration
	// applyDuration: the delta of the agent's apply_duration_seconds_sum.
	applyDuration time.Duration
	// notReady is the last Ready=False seen on the Node during the apply.
	notReady string
}

func (r applyResult) restartGate() time.Duration { return r.restart + r.probe }

// overhead is the agent's own time in an apply: from seeing the assignment
// to the gate's end, less the restart and the gate.
func (r applyResult) overhead() time.Duration { return r.applyDuration - r.restartGate() }

// apply assigns ConfigMap name and returns once the status reports it
// active, with the figures of the agent's metrics for this apply; seq is
// the number of successful applies the agent must have counted by then.
func (ab *assignBench) apply(ctx context.Context, name string, seq int) (applyResult, error) {
	r := applyResult{config: name}
	before, err := ab.scrape()
	if err != nil {
		return r, err
	}
	carrier := ab.carrier
	if carrier == "" {
		carrier = source.Annotation
	}
	r.total, r.notReady, err = assignAndWatch(ctx, ab.c.Client, ab.node, carrier, name)
	if err != nil {
		return r, err
	}

	// The agent counts the apply when its health gate has passed, which
	// may be well after it reported the config active (a kubelet that
	// reports Ready late); wait for the count so that the histograms hold
	// this apply, and so that the next apply starts after this one ended.
	var after map[string]float64
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if after, err = ab.scrape(); err != nil {
			return r, err
		}
		if after[`dkc_agent_applies_total{result="applied"}`] >= float64(seq) {
			break
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("agent counted %v applies, want %d", after[`dkc_agent_applies_total{result="applied"}`], seq)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, bad := range []string{"rolled_back", "refused", "failed"} {
		key := `dkc_agent_applies_total{result="` + bad + `"}`
		if after[key] != before[key] {
			return r, fmt.Errorf("agent counted an apply as %s", bad)
		}
	}
	if got := after[`dkc_agent_phase_duration_seconds_count{phase="restart"}`] - before[`dkc_agent_phase_duration_seconds_count{phase="restart"}`]; got != 1 {
		return r, fmt.Errorf("agent restarted the kubelet %v times, want 1", got)
	}
	delta := func(key string) time.Duration {
		return time.Duration((after[key] - before[key]) * float64(time.Second))
	}
	r.restart = delta(`dkc_agent_phase_duration_seconds_sum{phase="restart"}`)
	r.probe = delta(`dkc_agent_phase_duration_seconds_sum{phase="probe"}`)
	r.validate = delta(`dkc_agent_phase_duration_seconds_sum{phase="validate"}`)
	r.write = delta(`dkc_agent_phase_duration_seconds_sum{phase="write"}`)
	r.applyDuration = delta(`dkc_agent_apply_duration_seconds_sum`)
	return r, nil
}

// assignAndWatch assigns ConfigMap name (in kube-system, key kubelet) to
// node through carrier with one JSON merge patch, and returns the time from
// that write to the moment a watch on the Node delivers a status whose
// assigned and active both name the ConfigMap, and the last Ready=False
// condition the watch saw meanwhile ("" for none). A status error for the
// ConfigMap fails it, and so do 2 minutes without that status.
func assignAndWatch(ctx context.Context, client kubernetes.Interface, node string, carrier source.Carrier, name string) (time.Duration, string, error) {
	w, err := client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", node).String(),
	})
	if err != nil {
		return 0, "", fmt.Errorf("watch node: %w", err)
	}
	defer w.Stop()

	src := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: source.DefaultNamespace, Name: name, KubeletConfigKey: source.DefaultKey,
	}}
	cm, err := client.CoreV1().ConfigMaps(source.DefaultNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, "", err
	}
	payload, err := source.Payload(cm, source.DefaultKey)
	if err != nil {
		return 0, "", err
	}
	// Pinned, as kubectl dkc assign pins.
	patch, err := source.AssignPatch(carrier, src, source.NewPin(src, payload, nil))
	if err != nil {
		return 0, "", err
	}
	t0 := time.Now()
	if _, err := client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return 0, "", fmt.Errorf("assign: %w", err)
	}

	timeout := time.NewTimer(2 * time.Minute)
	defer timeout.Stop()
	var last *corev1.NodeConfigStatus
	var notReady string
	for {
		select {
		case <-timeout.C:
			return 0, notReady, fmt.Errorf("no status active %s within 2m; last status %+v", name, last)
		case ev, ok := <-w.ResultChan():
			if !ok {
				return 0, notReady, fmt.Errorf("watch of node %s ended", node)
			}
			if ev.Type != watch.Modified && ev.Type != watch.Added {
				continue
			}
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			at := time.Now()
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status != corev1.ConditionTrue {
					notReady = cond.Reason + ": " + cond.Message
				}
			}
			st, _, err := source.Status(n)
			if err != nil || st == nil {
				continue
			}
			last = st
			if !framework.IsConfigMap(st.Assigned, name) {
				continue
			}
			if st.Error != "" {
				return 0, notReady, fmt.Errorf("status error: %s", st.Error)
			}
			if framework.IsConfigMap(st.Active, name) {
				return at.Sub(t0), notReady, nil
			}
		}
	}
}

// scrape reads the agent's counters and histogram sums and counts.
func (ab *assignBench) scrape() (map[string]float64, error) {
	body, err := framework.HTTPGet(ab.metricsURL)
	if err != nil {
		return nil, fmt.Errorf("scrape agent metrics: %w", err)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "dkc_agent_") || strings.Contains(line, "_bucket") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metric line %q: %w", line, err)
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// report prints a table of every apply and reports the medians.
func (ab *assignBench) report(rs []applyResult) {
	b := ab.b
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-3s %-8s %9s %9s %9s %9s %9s %9s  %s\n", "#", "CONFIG", "TOTAL", "RESTART", "GATE", "CHECK+WR", "APPLY", "OVERHEAD", "READY=FALSE SEEN")
	notReady := 0
	for i, r := range rs {
		seen := "-"
		if r.notReady != "" {
			notReady++
			seen = r.notReady
		}
		fmt.Fprintf(&sb, "%-3d %-8s %9s %9s %9s %9s %9s %9s  %s\n", i+1, r.config,
			ms(r.total), ms(r.restart), ms(r.probe), ms(r.validate+r.write), ms(r.applyDuration), ms(r.overhead()), seen)
	}
	col := func(f func(applyResult) time.Duration) stats {
		var v []time.Duration
		for _, r := range rs {
			v = append(v, f(r))
		}
		return summarize(v)
	}
	total := col(func(r applyResult) time.Duration { return r.total })
	restart := col(func(r applyResult) time.Duration { return r.restart })
	probe := col(func(r applyResult) time.Duration { return r.probe })
	restartGate := col(applyResult.restartGate)
	overhead := col(applyResult.overhead)
	checkWrite := col(func(r applyResult) time.Duration { return r.validate + r.write })
	sb.WriteString("\n")
	fmt.Fprintf(&sb, "%-22s %9s %9s %9s %9s\n", fmt.Sprintf("over %d applies", len(rs)), "MEDIAN", "P90", "MIN", "MAX")
	for _, row := range []struct {
		name string
		s    stats
	}{
		{"assign -> active", total},
		{"restart + health gate", restartGate},
		{"  restart", restart},
		{"  health gate", probe},
		{"agent overhead", overhead},
		{"  check + write", checkWrite},
	} {
		fmt.Fprintf(&sb, "%-22s %9s %9s %9s %9s\n", row.name, ms(row.s.median), ms(row.s.p90), ms(row.s.min), ms(row.s.max))
	}
	fmt.Fprintf(&sb, "Ready=False seen during %d of %d applies\n", notReady, len(rs))
	b.Logf("assign -> status active, one kubelet v1.37.2, agent in exec mode\n%s", sb.String())

	b.ReportMetric(float64(total.median.Nanoseconds()), "ns/op")
	b.ReportMetric(total.median.Seconds(), "median-total-s")
	b.ReportMetric(total.p90.Seconds(), "p90-total-s")
	b.ReportMetric(restartGate.median.Seconds(), "median-restart-gate-s")
	b.ReportMetric(restart.median.Seconds(), "median-restart-s")
	b.ReportMetric(probe.median.Seconds(), "median-gate-s")
	b.ReportMetric(float64(overhead.median.Microseconds())/1000, "median-agent-overhead-ms")
	b.ReportMetric(float64(overhead.p90.Microseconds())/1000, "p90-agent-overhead-ms")
	b.ReportMetric(float64(len(rs)), "applies")
	b.ReportMetric(float64(notReady), "notready-applies")
}

type stats struct{ median, p90, min, max time.Duration }

// summarize returns the median (the mean of the middle two for an even
// count), the nearest-rank 90th percentile, the minimum and the maximum.
func summarize(v []time.Duration) stats {
	s := append([]time.Duration(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	n := len(s)
	if n == 0 {
		return stats{}
	}
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	rank := int(math.Ceil(0.9*float64(n))) - 1
	return stats{median: med, p90: s[rank], min: s[0], max: s[n-1]}
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) + "ms"
}
