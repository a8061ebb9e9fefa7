package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/kubectl-dkc/dkc/pkg/pool"
	"github.com/kubectl-dkc/dkc/pkg/source"
	dkcstatus "github.com/kubectl-dkc/dkc/pkg/status"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// statusNodes is how many Node objects BenchmarkStatusAtScale creates; set
// DKC_BENCH_STATUS_NODES for another count (at least 100).
const statusNodes = 5000

// BenchmarkStatusAtScale creates 5000 simulated Node objects on a real
// kube-apiserver v1.37.2 (no kubelets), shaped as kubelets register them
// and as dkc agents annotate them, and times the built `kubectl dkc status`
// and `kubectl dkc rollout status` (of a rollout over every node, left
// Running with its canary in progress) against the pinned `kubectl get
// nodes` over the same nodes in the same run, in rotating order, as
// separate processes whose output goes to a pipe. The figures of merit are
// the ratios of their medians to get nodes' (goal: at most 1.0). A
// NodeConfigPool over every node, reconciled by a `kubectl dkc controller`
// process, is timed too: how long the controller takes to count the pool's
// nodes, and `kubectl get nodeconfigpools` against get nodes.
//
// Run it with -benchtime=1x (make bench); DKC_BENCH_STATUS_REPS sets the
// number of timed runs of each command (default 7).
func BenchmarkStatusAtScale(b *testing.B) {
	count := benchEnvInt(b, "DKC_BENCH_STATUS_NODES", statusNodes, 100)
	reps := benchEnvInt(b, "DKC_BENCH_STATUS_REPS", 7, 3)
	kubectl, err := framework.Kubectl()
	if err != nil {
		b.Fatalf("no kubectl: %v; run `make components`, which builds the pinned v1.37.2", err)
	}
	b.StopTimer()
	c := framework.Setup(b, framework.Options{ControlPlaneOnly: true})
	ctx := context.Background()
	framework.InstallCRDs(b, c)

	nodes := make([]*corev1.Node, count)
	want := map[string]int{}
	for i := range nodes {
		var st simNodeState
		switch {
		case i%10 == 9:
			// No assignment: the local config, no dkc annotations.
		case i%20 == 0:
			st = simNodeState{assigned: "kubelet-b", active: "kubelet-a",
				err: "failed to sync: health check: kubelet /healthz: connection refused (rolled back)"}
		case i%20 == 1:
			st = simNodeState{assigned: "kubelet-b", active: "kubelet-a"}
		default:
			st = simNodeState{assigned: "kubelet-b", active: "kubelet-b"}
		}
		want[st.active]++
		if nodes[i], err = simNode(fmt.Sprintf("sim-%05d", i), i, st); err != nil {
			b.Fatal(err)
		}
	}
	took, err := createNodes(ctx, c.RESTConfig, nodes, 32)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("created %d Node objects in %s (32 concurrent clients)", count, took.Round(time.Millisecond))

	// The configs the nodes run exist, as in a real cluster: rollout start
	// reads the config each node runs to see whether it needs a drain.
	// A rollout over every node, for `rollout status`: started, then left
	// Running with its canary in progress, as no agent runs here.
	for _, name := range []string{"kubelet-a", "kubelet-b", "kubelet-c"} {
		if _, err := c.Client.CoreV1().ConfigMaps(source.DefaultNamespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: source.DefaultNamespace},
			Data:       map[string]string{source.DefaultKey: fleetTarget},
		}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	_, _, err = runTimed(c.Kubeconfig, framework.DKCBinary(), "rollout", "start", "--config", "kubelet-c", "--all",
		"--max-unavailable", "10%", "--name", "bench-status", "--wait", "--timeout", "5s")
	if exitErr := (*exec.ExitError)(nil); !errors.As(err, &exitErr) || exitErr.ExitCode() != dkcstatus.ExitTimeout {
		b.Fatalf("rollout start --wait --timeout 5s with no agents: %v; want exit code %d (timeout)", err, dkcstatus.ExitTimeout)
	}

	// A pool over every node, paused: the controller counts its nodes.
	ctl, err := startBenchController(ctx, b, c)
	if err != nil {
		b.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		b.Fatal(err)
	}
	poolObj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubectl-dkc.io/v1alpha1", "kind": "NodeConfigPool",
		"metadata": map[string]any{"name": "everyone", "namespace": source.DefaultNamespace},
		"spec": map[string]any{
			"nodeSelector": map[string]any{},
			"configSource": map[string]any{"configMap": map[string]any{"namespace": source.DefaultNamespace, "name": "kubelet-b", "kubeletConfigKey": source.DefaultKey}},
			"paused":       true,
		},
	}}
	pools := dyn.Resource(pool.Resource).Namespace(source.DefaultNamespace)
	poolBegan := time.Now()
	if _, err := pools.Create(ctx, poolObj, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		u, err := pools.Get(ctx, "everyone", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		selected, _, _ := unstructured.NestedInt64(u.Object, "status", "nodes", "selected")
		return selected == int64(count), nil
	}); err != nil {
		b.Fatalf("the controller did not count the pool's %d nodes: %v; log %s", count, err, ctl.LogPath)
	}
	poolCounted := time.Since(poolBegan)

	type command struct {
		name string
		argv []string
		// rows is the number of lines it must print (a header and one
		// row per node), or, when negative, a string it must print.
		rows int
		want string
		// exit is the code it must exit with: 2 for dkc status, which
		// shows the nodes that report an error.
		exit int
		runs []time.Duration
	}
	cmds := []*command{
		{name: "kubectl dkc status", argv: []string{framework.DKCBinary(), "status"}, rows: count + 1, exit: dkcstatus.ExitConfigError},
		{name: "kubectl get nodes", argv: []string{kubectl, "get", "nodes"}, rows: count + 1},
		{name: "kubectl dkc rollout status", argv: []string{framework.DKCBinary(), "rollout", "status", "bench-status"}, rows: -1,
			want: fmt.Sprintf("rollout/bench-status: Running, kube-system/kubelet-c over %d nodes", count)},
		{name: "kubectl get ncp", argv: []string{kubectl, "get", "nodeconfigpools", "-n", source.DefaultNamespace}, rows: 2,
			want: fmt.Sprintf("kubelet-b   1          %d", count)},
	}
	run := func(cmd *command) (time.Duration, error) {
		out, took, err := runTimed(c.Kubeconfig, cmd.argv...)
		if exitErr := (*exec.ExitError)(nil); errors.As(err, &exitErr) && exitErr.ExitCode() == cmd.exit {
			err = nil
		}
		if err != nil {
			return 0, err
		}
		if got := strings.Count(out, "\n"); cmd.rows >= 0 && got != cmd.rows {
			return 0, fmt.Errorf("%s printed %d lines, want %d", cmd.name, got, cmd.rows)
		}
		if !strings.Contains(out, cmd.want) {
			return 0, fmt.Errorf("%s printed no %q:\n%s", cmd.name, cmd.want, out)
		}
		return took, nil
	}
	// One untimed run each warms the page cache and the apiserver's watch
	// cache for both.
	for _, cmd := range cmds {
		if _, err := run(cmd); err != nil {
			b.Fatal(err)
		}
	}
	// The dkc table shows what the nodes hold, and exits 2 for the nodes
	// that report an error.
	out, _, err := runTimed(c.Kubeconfig, framework.DKCBinary(), "status")
	if exitErr := (*exec.ExitError)(nil); !errors.As(err, &exitErr) || exitErr.ExitCode() != dkcstatus.ExitConfigError {
		b.Fatalf("dkc status: %v, want exit code %d", err, dkcstatus.ExitConfigError)
	}
	settled := 0
	for _, line := range strings.Split(out, "\n") {
		// NODE CARRIER ASSIGNED ACTIVE ...
		if f := strings.Fields(line); len(f) > 3 && f[2] == "kube-system/kubelet-b" && f[3] == f[2] {
			settled++
		}
	}
	if settled != want["kubelet-b"] {
		b.Fatalf("dkc status shows %d nodes with kubelet-b assigned and active, want %d", settled, want["kubelet-b"])
	}

	for i := 0; i < reps; i++ {
		// Rotate which goes first, so that none always follows another.
		for j := range cmds {
			cmd := cmds[(i+j)%len(cmds)]
			took, err := run(cmd)
			if err != nil {
				b.Fatal(err)
			}
			cmd.runs = append(cmd.runs, took)
		}
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, "%-22s %9s %9s %9s %9s\n", fmt.Sprintf("%d nodes, %d runs", count, reps), "MEDIAN", "P90", "MIN", "MAX")
	summaries := map[string]stats{}
	for _, cmd := range cmds {
		s := summarize(cmd.runs)
		summaries[cmd.name] = s
		fmt.Fprintf(&sb, "%-22s %9s %9s %9s %9s\n", cmd.name, ms(s.median), ms(s.p90), ms(s.min), ms(s.max))
	}
	dkcStatus, getNodes, rolloutStatus, getPools := summaries[cmds[0].name], summaries[cmds[1].name], summaries[cmds[2].name], summaries[cmds[3].name]
	ratio := dkcStatus.median.Seconds() / getNodes.median.Seconds()
	rolloutRatio := rolloutStatus.median.Seconds() / getNodes.median.Seconds()
	fmt.Fprintf(&sb, "ratio of medians dkc status / get nodes: %.2f (goal <= 1.0)\n", ratio)
	fmt.Fprintf(&sb, "ratio of medians dkc rollout status / get nodes: %.2f (goal <= 1.0)\n", rolloutRatio)
	fmt.Fprintf(&sb, "ratio of medians get ncp / get nodes: %.2f\n", getPools.median.Seconds()/getNodes.median.Seconds())
	fmt.Fprintf(&sb, "pool created to its %d nodes counted by the controller: %s; controller peak RSS %.0f MiB\n", count, ms(poolCounted), mib(peakRSS(ctl.PID())))
	b.Logf("status at scale, apiserver v1.37.2, kubectl %s\n%s", kubectl, sb.String())

	b.ReportMetric(float64(dkcStatus.median.Nanoseconds()), "ns/op")
	b.ReportMetric(float64(count), "nodes")
	b.ReportMetric(took.Seconds(), "create-nodes-s")
	b.ReportMetric(dkcStatus.median.Seconds(), "median-dkc-status-s")
	b.ReportMetric(getNodes.median.Seconds(), "median-get-nodes-s")
	b.ReportMetric(ratio, "status/get-nodes")
	b.ReportMetric(rolloutStatus.median.Seconds(), "median-rollout-status-s")
	b.ReportMetric(rolloutRatio, "rollout-status/get-nodes")
	b.ReportMetric(getPools.median.Seconds(), "median-get-ncp-s")
	b.ReportMetric(poolCounted.Seconds(), "pool-counted-s")
	b.ReportMetric(mib(peakRSS(ctl.PID())), "controller-peak-rss-MiB")
}

// runTimed runs argv with KUBECONFIG=kubeconfig and its stdout on a pipe,
// and returns the stdout and the wall time from start to exit.
func runTimed(kubeconfig string, argv ...string) (string, time.Duration, error) {
	p, err := runProcess(kubeconfig, argv...)
	return p.out, p.wall, err
}

// process is what a command run to its end printed and cost.
type process struct {
	out  string
	wall time.Duration
	// cpu is its user and system time; peakRSS its largest resident set,
	// as its VmHWM showed it, read every 20 ms while it ran. (Its rusage's
	// ru_maxrss would not do: Go starts a child with the parent's memory
	// mapped until the exec, and the kernel counts the parent's resident
	// set into the child's peak.)
	cpu     time.Duration
	peakRSS int64
}

// runProcess runs argv with KUBECONFIG=kubeconfig to its end.
func runProcess(kubeconfig string, argv ...string) (process, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	began := time.Now()
	err := cmd.Start()
	var peak atomic.Int64
	if err == nil {
		done := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				if rss := peakRSS(cmd.Process.Pid); rss > peak.Load() {
					peak.Store(rss)
				}
				select {
				case <-done:
					return
				case <-tick.C:
				}
			}
		}()
		err = cmd.Wait()
		close(done)
		<-sampled
	}
	p := process{out: out.String(), wall: time.Since(began), peakRSS: peak.Load()}
	if st := cmd.ProcessState; st != nil {
		p.cpu = st.UserTime() + st.SystemTime()
	}
	if err != nil {
		return p, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, errOut.String())
	}
	return p, nil
}
