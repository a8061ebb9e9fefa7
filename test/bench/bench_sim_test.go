package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// This file holds what the fleet and status-at-scale benchmarks share:
// simulated nodes, which are plain Node objects created through the real
// apiserver, shaped as a kubelet registers them and as the dkc agent then
// annotates them; and the apiserver's request counter.

// benchEnvInt is the integer in environment variable name, else def. A value
// below min fails the benchmark.
func benchEnvInt(b *testing.B, name string, def, min int) int {
	b.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < min {
		b.Fatalf("%s=%q: want a number of at least %d", name, s, min)
	}
	return n
}

// benchEnvDuration is the duration in environment variable name, else def.
func benchEnvDuration(b *testing.B, name string, def time.Duration) time.Duration {
	b.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		b.Fatalf("%s=%q: want a duration such as 2s", name, s)
	}
	return d
}

// simNodeState is the dkc state a simulated node shows.
type simNodeState struct {
	// assigned and active name ConfigMaps in kube-system; "" is the local
	// config. With no assignment the node shows no dkc annotation at all.
	assigned, active string
	// err is the status's error.
	err string
}

// simNode returns the Node object of simulated node i named name: what a
// kubelet v1.37 registers (labels, addresses, capacity, the four standard
// conditions, node info; no images, as kwok's nodes have none), plus, when
// st assigns a config, the annotations and the condition that the dkc agent
// writes.
func simNode(name string, i int, st simNodeState) (*corev1.Node, error) {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("4"),
		corev1.ResourceMemory:           resource.MustParse("16374852Ki"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("101430960Ki"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname":           name,
				"kubernetes.io/os":                 "linux",
				"kubernetes.io/arch":               "amd64",
				"beta.kubernetes.io/os":            "linux",
				"beta.kubernetes.io/arch":          "amd64",
				"topology.kubernetes.io/zone":      fmt.Sprintf("zone-%c", 'a'+i%3),
				"node.kubernetes.io/instance-type": "sim",
			},
			Annotations: map[string]string{
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    res,
			Allocatable: res.DeepCopy(),
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
			},
			Addresses: []corev1.NodeAddress{
				// On loopback, where nothing serves a kubelet: the
				// apiserver's node proxy, when asked, reaches no other
				// host and is refused at once.
				{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("127.%d.%d.%d", 1+i>>16&255, i>>8&255, i&255)},
				{Type: corev1.NodeHostName, Address: name},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID:               fmt.Sprintf("%032x", i),
				SystemUUID:              fmt.Sprintf("%032x", i),
				BootID:                  fmt.Sprintf("%032x", i+1),
				KernelVersion:           "6.18.0",
				OSImage:                 "Debian GNU/Linux 13 (trixie)",
				ContainerRuntimeVersion: "containerd://1.7.24",
				KubeletVersion:          "v1.37.2",
				OperatingSystem:         "linux",
				Architecture:            "amd64",
			},
		},
	}
	if st.assigned == "" {
		return node, nil
	}
	ref := func(cm string) *corev1.NodeConfigSource {
		if cm == "" {
			return nil
		}
		return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
			Namespace: source.DefaultNamespace, Name: cm, KubeletConfigKey: source.DefaultKey,
			UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012x", len(cm))), ResourceVersion: "1234",
		}}
	}
	assigned := ref(st.assigned)
	spec := assigned.DeepCopy()
	spec.ConfigMap.UID, spec.ConfigMap.ResourceVersion = "", ""
	status := &corev1.NodeConfigStatus{Assigned: assigned, Active: ref(st.active), LastKnownGood: ref(st.active), Error: st.err}
	history := []source.HistoryEntry{{Source: ref(st.active), Time: now, Result: source.ResultApplied}}
	for key, v := range map[string]any{source.AssignedAnnotation: spec, source.StatusAnnotation: status, source.HistoryAnnotation: history} {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		node.Annotations[key] = string(b)
	}
	reason, condStatus, msg := "Applied", corev1.ConditionTrue, "kubelet runs kube-system/"+st.active
	if st.err != "" {
		reason, condStatus, msg = "RolledBack", corev1.ConditionFalse, st.err
	}
	node.Status.Conditions = append(node.Status.Conditions, cond(source.ConditionType, condStatus, reason, msg))
	return node, nil
}

// createNodes creates nodes through the apiserver with workers concurrent
// clients, and returns how long it took.
func createNodes(ctx context.Context, cfg *rest.Config, nodes []*corev1.Node, workers int) (time.Duration, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	began := time.Now()
	work := make(chan *corev1.Node)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("create node %s: %w", n.Name, err)
					for range work {
					}
					return
				}
			}
		}()
	}
	for _, n := range nodes {
		work <- n
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return time.Since(began), nil
}

// apiserverMetrics is what the benchmarks read from the apiserver's
// /metrics: the sum of apiserver_request_total by verb and in all, the
// bytes of the request bodies written (apiserver_request_body_size_bytes_sum:
// creates, updates, patches and deletes) by resource and in all, and the
// apiserver process's CPU time (process_cpu_seconds_total).
type apiserverMetrics struct {
	byVerb         map[string]float64
	requests       float64
	bodyByResource map[string]float64
	bodyBytes      float64
	cpu            time.Duration
}

// readAPIServerMetrics reads the apiserver's /metrics.
func readAPIServerMetrics(ctx context.Context, c *framework.Cluster) (apiserverMetrics, error) {
	m := apiserverMetrics{byVerb: map[string]float64{}, bodyByResource: map[string]float64{}}
	body, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return m, fmt.Errorf("get apiserver /metrics: %w", err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		request := strings.HasPrefix(line, "apiserver_request_total{")
		body := strings.HasPrefix(line, "apiserver_request_body_size_bytes_sum{")
		if !request && !body && !strings.HasPrefix(line, "process_cpu_seconds_total ") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return m, fmt.Errorf("metric line %q: %w", line, err)
		}
		switch {
		case request:
			verb := metricLabel(line, "verb")
			m.byVerb[verb] += v
			m.requests += v
		case body:
			m.bodyByResource[metricLabel(line, "resource")] += v
			m.bodyBytes += v
		default:
			m.cpu = time.Duration(v * float64(time.Second))
		}
	}
	return m, sc.Err()
}

// metricLabel is the value of label name in a line of the Prometheus text
// format, "?" when the line has none.
func metricLabel(line, name string) string {
	_, rest, ok := strings.Cut(line, name+`="`)
	if !ok {
		return "?"
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}
