package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-dkc/dkc/pkg/kubelet"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// sideBySideApplies is how many applies BenchmarkNativeDKCVsAgent measures
// for each variant; set DKC_BENCH_SIDE_BY_SIDE_APPLIES for another count.
const sideBySideApplies = 10

// BenchmarkNativeDKCVsAgent runs the original system and dkc side by side on
// the same kubelet binary, v1.23.17, in one cluster: kube-apiserver v1.23.17
// with the DynamicKubeletConfig gate, and two nodes.
//
//   - native: the kubelet runs its own DKC (the gate and
//     --dynamic-config-dir). It restarts by exiting, and the harness
//     supervisor starts it again after 200 ms, as systemd's Restart=always
//     with a short RestartSec would.
//   - agent: the same kubelet binary without the gate, so its DKC is off,
//     and a dkc agent in exec mode restarting it through the harness's
//     restart command (the same supervisor, the same 200 ms). Its
//     identity is deploy/rbac.yaml's with get on nodes/proxy in place of
//     nodes/healthz and nodes/configz, as docs/security.md says kubelets older
//     than 1.33 need: without it the kubelet answers the health gate 403.
//
// Both get their assignment the same way: one JSON merge patch of the Node's
// spec.configSource, which this apiserver keeps, and which is the carrier
// `kubectl dkc assign` picks here. The clock stops when a watch on the Node
// delivers a status.config whose assigned and active both name the new
// ConfigMap (the kubelet writes it for native, the agent for agent). Each
// means the kubelet runs the config: native reports it once the new kubelet
// loaded it; the agent once the restarted kubelet's configz shows it, while
// its health gate goes on to wait for Ready. The agent's time to the gate's
// end ("apply until Ready") is printed too; the next apply starts only
// after it.
//
// After one unmeasured warm-up apply each, the variants alternate, each
// switching between two valid ConfigMaps (maxPods 41 and 42) of its own
// node, and the order within a round alternates too. The figure of merit is
// the ratio of the agent's median to native's (goal: at most 0.55).
func BenchmarkNativeDKCVsAgent(b *testing.B) {
	applies := benchEnvInt(b, "DKC_BENCH_SIDE_BY_SIDE_APPLIES", sideBySideApplies, 3)
	binDir := framework.LegacyBinDir(b)
	const gate = "--feature-gates=DynamicKubeletConfig=true"
	b.StopTimer()
	c := framework.Setup(b, framework.Options{
		Nodes:          2,
		BinDir:         binDir,
		EtcdBinDir:     framework.DefaultBinDir(),
		LegacyKubelet:  true,
		APIServerFlags: []string{gate},
		// Only the first node's kubelet runs its own DKC.
		NodeKubeletFlags: func(n *framework.Node) []string {
			if !strings.HasSuffix(n.Name, "-1") {
				return nil
			}
			return []string{gate, "--dynamic-config-dir=" + filepath.Join(n.Dir, "dynamic-config")}
		},
	})
	ctx := context.Background()
	native, withAgent := c.Nodes[0], c.Nodes[1]

	carrier, err := source.Detect(ctx, c.Client.CoreV1().Nodes(), withAgent.Name)
	if err != nil {
		b.Fatal(err)
	}
	if carrier != source.Native {
		b.Fatalf("carrier %q on apiserver %s with the gate, want %q", carrier, framework.LegacyVersion, source.Native)
	}

	configs := map[*framework.Node][]string{}
	for _, n := range []*framework.Node{native, withAgent} {
		for i := 0; i < 2; i++ {
			name := fmt.Sprintf("%s-%c", n.Name, 'a'+i)
			createMaxPodsConfig(ctx, b, c, n, name, 41+i)
			configs[n] = append(configs[n], name)
		}
	}

	kubeconfig := framework.AgentKubeconfig(b, c)
	// Kubelet 1.23 has no fine-grained kubelet authorization: it asks for
	// nodes/proxy on /healthz and /configz, which deploy/rbac.yaml does not
	// grant, so the agent's health gate could never pass. Grant what
	// docs/security.md says kubelets older than 1.33 need.
	status, body := kubeletHealthz(b, withAgent, kubeconfig)
	if want := "subresource=proxy"; status != http.StatusForbidden || !strings.Contains(body, want) {
		b.Fatalf("kubelet %s /healthz as the agent with deploy/rbac.yaml only: %d %q, want 403 naming %s", framework.LegacyVersion, status, body, want)
	}
	grantOldKubeletProxy(ctx, b, c)
	// The kubelet caches the 403 for 30 s; the warm-up's restart drops it.
	ag, metricsURL := startBenchAgent(b, withAgent, kubeconfig, 2*time.Minute)
	agentBench := &assignBench{b: b, c: c, node: withAgent.Name, metricsURL: metricsURL, carrier: source.Native}

	// applyNative assigns name to the native node and checks that its
	// kubelet restarted for it.
	applyNative := func(name string) (applyResult, error) {
		r := applyResult{config: name}
		starts := native.KubeletStarts()
		var err error
		r.total, r.notReady, err = assignAndWatch(ctx, c.Client, native.Name, source.Native, name)
		if err != nil {
			return r, fmt.Errorf("native: %w; see %s", err, native.LogPath)
		}
		if got := native.KubeletStarts(); got <= starts {
			return r, fmt.Errorf("native: status active %s, but the kubelet did not restart", name)
		}
		return r, nil
	}
	applyAgent := func(name string, seq int) (applyResult, error) {
		r, err := agentBench.apply(ctx, name, seq)
		if err != nil {
			return r, fmt.Errorf("agent: %w; see %s", err, ag.LogPath)
		}
		return r, nil
	}

	// Warm-up: moves both kubelets off their local config.
	if _, err := applyNative(configs[native][0]); err != nil {
		b.Fatalf("warm-up: %v", err)
	}
	if _, err := applyAgent(configs[withAgent][0], 1); err != nil {
		b.Fatalf("warm-up: %v", err)
	}

	var nativeRuns, agentRuns []applyResult
	b.ResetTimer()
	for i := 0; i < applies; i++ {
		steps := []func() error{
			func() error {
				r, err := applyNative(configs[native][(i+1)%2])
				nativeRuns = append(nativeRuns, r)
				return err
			},
			func() error {
				r, err := applyAgent(configs[withAgent][(i+1)%2], i+2)
				agentRuns = append(agentRuns, r)
				return err
			},
		}
		if i%2 == 1 {
			steps[0], steps[1] = steps[1], steps[0]
		}
		for _, step := range steps {
			b.StartTimer()
			err := step()
			b.StopTimer()
			if err != nil {
				b.Fatalf("apply %d: %v", i+1, err)
			}
			// Let the status writes of this apply land before the next.
			time.Sleep(time.Second)
		}
	}
	if err := ag.Stop(); err != nil {
		b.Fatal(err)
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, "%-3s %12s %12s %12s %12s  %s\n", "#", "NATIVE", "AGENT", "AG.RESTART", "AG.GATE", "READY=FALSE SEEN (native | agent)")
	for i := range nativeRuns {
		n, a := nativeRuns[i], agentRuns[i]
		fmt.Fprintf(&sb, "%-3d %12s %12s %12s %12s  %s | %s\n", i+1, ms(n.total), ms(a.total), ms(a.restart), ms(a.probe), orDash(n.notReady), orDash(a.notReady))
	}
	col := func(rs []applyResult, f func(applyResult) time.Duration) stats {
		var v []time.Duration
		for _, r := range rs {
			v = append(v, f(r))
		}
		return summarize(v)
	}
	total := func(r applyResult) time.Duration { return r.total }
	nat, agt := col(nativeRuns, total), col(agentRuns, total)
	agRestart := col(agentRuns, func(r applyResult) time.Duration { return r.restart })
	agGate := col(agentRuns, func(r applyResult) time.Duration { return r.probe })
	agOverhead := col(agentRuns, applyResult.overhead)
	agApply := col(agentRuns, func(r applyResult) time.Duration { return r.applyDuration })
	sb.WriteString("\n")
	fmt.Fprintf(&sb, "%-32s %9s %9s %9s %9s\n", fmt.Sprintf("assign -> active, %d applies each", applies), "MEDIAN", "P90", "MIN", "MAX")
	for _, row := range []struct {
		name string
		s    stats
	}{
		{"native DKC (kubelet 1.23.17)", nat},
		{"dkc agent (kubelet 1.23.17)", agt},
		{"  agent: restart", agRestart},
		{"  agent: health gate", agGate},
		{"  agent: apply until Ready", agApply},
		{"  agent: overhead", agOverhead},
	} {
		fmt.Fprintf(&sb, "%-32s %9s %9s %9s %9s\n", row.name, ms(row.s.median), ms(row.s.p90), ms(row.s.min), ms(row.s.max))
	}
	medianRatio := agt.median.Seconds() / nat.median.Seconds()
	p90Ratio := agt.p90.Seconds() / nat.p90.Seconds()
	fmt.Fprintf(&sb, "agent/native: median %.2f, p90 %.2f (goal: median <= 0.55)\n", medianRatio, p90Ratio)
	b.Logf("native DKC vs dkc agent on kubelet %s, apiserver %s\n%s", framework.LegacyVersion, framework.LegacyVersion, sb.String())

	b.ReportMetric(float64(agt.median.Nanoseconds()), "ns/op")
	b.ReportMetric(nat.median.Seconds(), "median-native-s")
	b.ReportMetric(nat.p90.Seconds(), "p90-native-s")
	b.ReportMetric(agt.median.Seconds(), "median-agent-s")
	b.ReportMetric(agt.p90.Seconds(), "p90-agent-s")
	b.ReportMetric(agApply.median.Seconds(), "median-agent-until-ready-s")
	b.ReportMetric(agRestart.median.Seconds(), "median-agent-restart-s")
	b.ReportMetric(agGate.median.Seconds(), "median-agent-gate-s")
	b.ReportMetric(medianRatio, "agent/native-median")
	b.ReportMetric(p90Ratio, "agent/native-p90")
	b.ReportMetric(float64(applies), "applies-each")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// kubeletHealthz reads node n's kubelet /healthz at :10250 as kubeconfig's
// user, as the agent's health gate does, and returns the status code and
// body.
func kubeletHealthz(b *testing.B, n *framework.Node, kubeconfig string) (int, string) {
	b.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	client, err := kubelet.NewKubeletClient(cfg, kubelet.KubeletTLS{CAFile: n.KubeletCAFile(), ServerName: n.Name})
	if err != nil {
		b.Fatal(err)
	}
	resp, err := client.Get("https://" + n.IP + ":10250/healthz")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp.StatusCode, strings.TrimSpace(string(body))
}

// grantOldKubeletProxy does what docs/security.md ("Kubelets older than 1.33")
// says an agent of such a kubelet needs: in deploy/rbac.yaml's ClusterRole,
// get on nodes/proxy in place of the nodes/healthz and nodes/configz rule.
func grantOldKubeletProxy(ctx context.Context, b *testing.B, c *framework.Cluster) {
	b.Helper()
	const name = "kubectl-dkc:agent"
	role, err := c.Client.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	replaced := false
	for i, r := range role.Rules {
		if strings.Join(r.Resources, ",") == "nodes/healthz,nodes/configz" {
			role.Rules[i] = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes/proxy"}, Verbs: []string{"get"}}
			replaced = true
		}
	}
	if !replaced {
		b.Fatalf("ClusterRole %s has no rule on nodes/healthz and nodes/configz to replace: %+v", name, role.Rules)
	}
	if _, err := c.Client.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		b.Fatal(err)
	}
}
