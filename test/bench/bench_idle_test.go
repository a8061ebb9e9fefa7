package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// idleRSSLimit is issue 9's budget for an idle agent on a node: anonymous
// and file-backed memory together.
const idleRSSLimit = 30 << 20

// BenchmarkAgentIdle measures what an idle agent costs its node, on a real
// kubelet v1.37.2 with a config assigned and active: its resident memory
// (anonymous and file-backed, from /proc/PID/status), goroutines and CPU
// (its own /metrics), and every request it makes to the apiserver over the
// idle window (the apiserver's audit log, by the agent's user). It runs the
// slim kubectl-dkc-agent ($DKC_AGENT_BINARY, else built here as `make
// agent` does) and, for comparison, `kubectl-dkc agent` ($DKC_BINARY), one
// after the other on the same node and store. The window is 60s, or
// $DKC_IDLE_SECONDS. It fails when the slim agent exceeds 30 MiB.
// `make bench BENCH=AgentIdle` runs it; docs/performance.md has the figures.
func BenchmarkAgentIdle(b *testing.B) {
	idle := time.Minute
	if s := os.Getenv("DKC_IDLE_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("DKC_IDLE_SECONDS=%q: want a number of seconds", s)
		}
		idle = time.Duration(n) * time.Second
	}
	b.StopTimer()
	slim := framework.AgentBinary(b)

	// The audit log records every request of the agent's user, watches
	// included, and nothing else.
	auditDir := b.TempDir()
	policy := filepath.Join(auditDir, "policy.yaml")
	auditLog := filepath.Join(auditDir, "audit.log")
	if err := os.WriteFile(policy, []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  users: ["`+framework.AgentIdentity+`"]
- level: None
`), 0o644); err != nil {
		b.Fatal(err)
	}
	c := framework.Setup(b, framework.Options{Nodes: 1, APIServerFlags: []string{
		"--audit-policy-file=" + policy, "--audit-log-path=" + auditLog, "--audit-log-format=json",
	}})
	ctx := context.Background()
	n := c.Nodes[0]
	kubeconfig := framework.AgentKubeconfig(b, c)
	local, err := os.ReadFile(n.ConfigPath)
	if err != nil {
		b.Fatal(err)
	}
	payload := framework.ConfigWith(b, local, framework.MaxPods(57))
	const config = "bench-idle"
	if _, err := c.Client.CoreV1().ConfigMaps(source.DefaultNamespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: config, Namespace: source.DefaultNamespace},
		Data:       map[string]string{source.DefaultKey: payload},
	}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}

	args := n.AgentArgs(framework.AgentOptions{Kubeconfig: kubeconfig, TrialDuration: time.Hour})
	agents := []struct {
		name string
		path string
		args []string
	}{
		{"kubectl-dkc-agent", slim, args[1:]}, // args[0] is "agent"
		{"kubectl-dkc agent", framework.DKCBinary(), args},
	}
	var rows []idleFigures
	for i, a := range agents {
		ag, err := n.StartAgent(a.path, a.args)
		if err != nil {
			b.Fatal(err)
		}
		metricsURL := "http://" + n.IP + ":10390/metrics"
		if err := waitHTTP(metricsURL, 30*time.Second); err != nil {
			b.Fatalf("%s: %v; see %s", a.name, err, ag.LogPath)
		}
		if i == 0 {
			ab := &assignBench{b: b, c: c, node: n.Name, metricsURL: metricsURL}
			if _, err := ab.apply(ctx, config, 1); err != nil {
				b.Fatalf("assign %s: %v; see %s", config, err, ag.LogPath)
			}
		}
		// Let start-up, the first sync and its status report settle.
		time.Sleep(10 * time.Second)
		f, err := measureIdle(ag.PID(), metricsURL, auditLog, idle)
		if err != nil {
			b.Fatalf("%s: %v; see %s", a.name, err, ag.LogPath)
		}
		f.name = a.name
		if st, err := os.Stat(a.path); err == nil {
			f.binary = st.Size()
		}
		rows = append(rows, f)
		if err := ag.Stop(); err != nil {
			b.Fatal(err)
		}
	}

	b.Logf("idle agent on a kubelet v1.37.2 node, config %s active, %s window:", config, idle)
	b.Logf("%-18s %8s %9s %9s %9s %10s %8s  %s", "BINARY", "SIZE", "RSS", "ANON", "FILE", "GOROUTINES", "CPU", "API REQUESTS")
	for _, f := range rows {
		b.Logf("%-18s %7.1fM %8.1fM %8.1fM %8.1fM %10d %7.2fs  %s", f.name, mib(f.binary), mib(f.rssAnon+f.rssFile+f.rssShmem),
			mib(f.rssAnon), mib(f.rssFile), f.goroutines, f.cpu.Seconds(), f.requestSummary())
	}
	slimRow := rows[0]
	b.ReportMetric(mib(slimRow.rssAnon+slimRow.rssFile+slimRow.rssShmem), "RSS-MiB")
	b.ReportMetric(mib(slimRow.rssAnon), "anon-MiB")
	b.ReportMetric(mib(slimRow.rssFile), "file-MiB")
	b.ReportMetric(float64(slimRow.goroutines), "goroutines")
	b.ReportMetric(float64(slimRow.requests()), "requests/window")
	if total := slimRow.rssAnon + slimRow.rssFile + slimRow.rssShmem; total > idleRSSLimit {
		b.Errorf("idle kubectl-dkc-agent uses %.1f MiB, over the %d MiB budget", mib(total), idleRSSLimit>>20)
	}
}

// idleFigures is one agent's idle window.
type idleFigures struct {
	name                       string
	binary                     int64
	rssAnon, rssFile, rssShmem int64
	goroutines                 int
	cpu                        time.Duration
	requestsByVerb             map[string]int
}

func (f idleFigures) requests() int {
	n := 0
	for _, c := range f.requestsByVerb {
		n += c
	}
	return n
}

func (f idleFigures) requestSummary() string {
	if len(f.requestsByVerb) == 0 {
		return "0"
	}
	var verbs []string
	for v, c := range f.requestsByVerb {
		verbs = append(verbs, fmt.Sprintf("%s=%d", v, c))
	}
	sort.Strings(verbs)
	return fmt.Sprintf("%d (%s)", f.requests(), strings.Join(verbs, " "))
}

// measureIdle watches an agent for window and returns its figures: memory
// at the end, CPU and requests over the window.
func measureIdle(pid int, metricsURL, auditLog string, window time.Duration) (idleFigures, error) {
	var f idleFigures
	before, err := goMetrics(metricsURL)
	if err != nil {
		return f, err
	}
	began := time.Now()
	time.Sleep(window)
	ended := time.Now()
	after, err := goMetrics(metricsURL)
	if err != nil {
		return f, err
	}
	f.cpu = time.Duration((after["process_cpu_seconds_total"] - before["process_cpu_seconds_total"]) * float64(time.Second))
	f.goroutines = int(after["go_goroutines"])
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return f, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var field *int64
		switch k {
		case "RssAnon":
			field = &f.rssAnon
		case "RssFile":
			field = &f.rssFile
		case "RssShmem":
			field = &f.rssShmem
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return f, fmt.Errorf("/proc/%d/status %s: %w", pid, k, err)
		}
		*field = kb << 10
	}
	f.requestsByVerb, err = auditedRequests(auditLog, framework.AgentIdentity, began, ended)
	return f, err
}

// goMetrics reads the unlabelled go_ and process_ metrics of a /metrics page.
func goMetrics(url string) (map[string]float64, error) {
	body, err := framework.HTTPGet(url)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.ContainsAny(name, "{#") || !(strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_")) {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}

// auditedRequests counts user's requests in a JSON audit log that began in
// [from, to), by verb. Each request counts once: at ResponseStarted for a
// watch, at ResponseComplete (or Panic) otherwise.
func auditedRequests(path, user string, from, to time.Time) (map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Verb            string    `json:"verb"`
			Stage           string    `json:"stage"`
			RequestReceived time.Time `json:"requestReceivedTimestamp"`
			User            struct {
				Username string `json:"username"`
			} `json:"user"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("audit log %s: %w", path, err)
		}
		if ev.User.Username != user || ev.RequestReceived.Before(from) || !ev.RequestReceived.Before(to) {
			continue
		}
		if (ev.Verb == "watch") == (ev.Stage == "ResponseStarted") || ev.Stage == "Panic" {
			counts[ev.Verb]++
		}
	}
	return counts, sc.Err()
}

// waitHTTP waits until url answers 200.
func waitHTTP(url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, err := framework.HTTPGet(url)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer within %s: %w", url, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
