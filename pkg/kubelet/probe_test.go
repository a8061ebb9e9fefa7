package kubelet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// fakeNode serves what the prober reads: the kubelet's healthz on one
// server, and the Node, its Lease and configz on an apiserver stand-in.
type fakeNode struct {
	mu          sync.Mutex
	healthzCode int
	healthzBody string
	configz     string
	ready       corev1.ConditionStatus
	heartbeat   time.Time
	renew       time.Time
	healthzHits int
	// onHealthz runs at each healthz request, under mu.
	onHealthz func(n *fakeNode)
}

func (f *fakeNode) healthz(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.healthzHits++
	if f.onHealthz != nil {
		f.onHealthz(f)
	}
	w.WriteHeader(f.healthzCode)
	fmt.Fprint(w, f.healthzBody)
}

func (f *fakeNode) apiserver(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var obj any
	switch r.URL.Path {
	case "/api/v1/nodes/n1/proxy/configz":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, f.configz)
		return
	case "/api/v1/nodes/n1":
		obj = &corev1.Node{
			TypeMeta:   metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: "n1"},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeReady, Status: f.ready, Reason: "KubeletNotReady", Message: "container runtime is down", LastHeartbeatTime: metav1.NewTime(f.heartbeat)},
			}},
		}
	case "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1":
		renew := metav1.NewMicroTime(f.renew)
		obj = &coordinationv1.Lease{
			TypeMeta:   metav1.TypeMeta{Kind: "Lease", APIVersion: "coordination.k8s.io/v1"},
			ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "kube-node-lease"},
			Spec:       coordinationv1.LeaseSpec{RenewTime: &renew},
		}
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(obj)
}

// since is the restart time the tests use; heartbeats have whole seconds.
var since = time.Date(2026, 5, 1, 10, 0, 0, 700_000_000, time.UTC)

func healthyNode() *fakeNode {
	return &fakeNode{
		healthzCode: http.StatusOK,
		healthzBody: "ok",
		configz:     `{"kubeletconfig":{"maxPods":42,"syncFrequency":"1m0s","healthzPort":10248}}`,
		ready:       corev1.ConditionTrue,
		heartbeat:   since.Add(time.Second).Truncate(time.Second),
		renew:       since.Add(300 * time.Millisecond),
	}
}

func startFakeNode(t *testing.T, n *fakeNode) (healthzURL string, client kubernetes.Interface) {
	t.Helper()
	hz := httptest.NewServer(http.HandlerFunc(n.healthz))
	t.Cleanup(hz.Close)
	api := httptest.NewServer(http.HandlerFunc(n.apiserver))
	t.Cleanup(api.Close)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: api.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	return hz.URL + "/healthz", client
}

func TestProbe(t *testing.T) {
	const wantCfg = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 42\nsyncFrequency: 60s\n"
	tests := map[string]struct {
		edit    func(n *fakeNode)
		want    string // config
		settle  time.Duration
		wantErr string // with URL for the healthz URL
	}{
		"healthy": {},
		"healthz fails": {
			edit: func(n *fakeNode) {
				n.healthzCode, n.healthzBody = http.StatusInternalServerError, "[-]syncloop failed\n"
			},
			wantErr: `health gate: healthz: GET URL: 500 Internal Server Error: "[-]syncloop failed"`,
		},
		"healthz answers something else": {
			edit:    func(n *fakeNode) { n.healthzBody = "maybe" },
			wantErr: `health gate: healthz: GET URL: 200 OK: "maybe"`,
		},
		"configz differs": {
			edit:    func(n *fakeNode) { n.configz = `{"kubeletconfig":{"maxPods":110,"syncFrequency":"1m0s"}}` },
			wantErr: "health gate: configz: maxPods is 110, want 42",
		},
		"many fields differ": {
			want:    `{"maxPods":1,"port":2,"readOnlyPort":3,"syncFrequency":"4s","healthzPort":10248}`,
			wantErr: `health gate: configz: maxPods is 42, want 1; port is not set, want 2; readOnlyPort is not set, want 3; and 1 more`,
		},
		"configz without kubeletconfig": {
			edit:    func(n *fakeNode) { n.configz = `{"other":{}}` },
			wantErr: "health gate: configz: configz response has no .kubeletconfig object",
		},
		"not ready": {
			edit:    func(n *fakeNode) { n.ready = corev1.ConditionFalse },
			wantErr: "health gate: node: Ready is False: KubeletNotReady: container runtime is down",
		},
		"ready heartbeat before the restart": {
			edit:    func(n *fakeNode) { n.heartbeat = since.Add(-time.Second).Truncate(time.Second) },
			wantErr: "health gate: node: Ready heartbeat 2026-05-01T09:59:59Z is from before the restart at 2026-05-01T10:00:00.7Z",
		},
		"ready heartbeat in the restart's second, settling": {
			edit:    func(n *fakeNode) { n.heartbeat = since.Truncate(time.Second) },
			wantErr: "health gate: node: Ready heartbeat 2026-05-01T10:00:00Z is from the second of the restart at 2026-05-01T10:00:00.7Z; waiting up to 2s for a later one",
		},
		"ready heartbeat in the restart's second, settled": {
			edit:   func(n *fakeNode) { n.heartbeat = since.Truncate(time.Second) },
			settle: 50 * time.Millisecond,
		},
		"lease not renewed since the restart": {
			edit:    func(n *fakeNode) { n.renew = since.Add(-time.Millisecond) },
			wantErr: "health gate: node: lease renewed at 2026-05-01T10:00:00.699Z, not after the restart at 2026-05-01T10:00:00.7Z",
		},
		"expected config is not YAML": {
			want:    "maxPods: [",
			wantErr: "health gate: expected config: yaml: line 1: did not find expected node content",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := healthyNode()
			if tc.edit != nil {
				tc.edit(n)
			}
			url, client := startFakeNode(t, n)
			p := NewProber(ProberConfig{Client: client, NodeName: "n1", HealthzURL: url, Interval: 10 * time.Millisecond})
			if tc.settle != 0 {
				p.settle = tc.settle
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			cfg := wantCfg
			if tc.want != "" {
				cfg = tc.want
			}
			err := p.Probe(ctx, Expectation{Config: []byte(cfg), Since: since})
			if got := strings.ReplaceAll(errString(err), url, "URL"); got != tc.wantErr {
				t.Errorf("error = %q, want %q", got, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrHealthGate) {
				t.Errorf("error does not wrap ErrHealthGate")
			}
		})
	}
}

// TestProbeRetries proves Probe keeps trying until the kubelet is healthy.
func TestProbeRetries(t *testing.T) {
	n := healthyNode()
	n.healthzCode = http.StatusServiceUnavailable
	n.onHealthz = func(n *fakeNode) {
		if n.healthzHits == 3 {
			n.healthzCode = http.StatusOK
		}
	}
	url, client := startFakeNode(t, n)
	p := NewProber(ProberConfig{Client: client, NodeName: "n1", HealthzURL: url, Interval: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Probe(ctx, Expectation{Config: []byte(`{"maxPods":42}`), Since: since}); err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.healthzHits != 3 {
		t.Errorf("healthz asked %d times, want 3", n.healthzHits)
	}
}

func TestHealthzURL(t *testing.T) {
	tests := map[string]struct {
		url     string
		config  string
		want    string
		wantErr string
	}{
		"defaults":             {config: `{}`, want: "http://127.0.0.1:10248/healthz"},
		"bind address, port":   {config: `{"healthzBindAddress":"198.51.100.11","healthzPort":10300}`, want: "http://198.51.100.11:10300/healthz"},
		"unspecified address":  {config: `{"healthzBindAddress":"0.0.0.0"}`, want: "http://127.0.0.1:10248/healthz"},
		"IPv6 address":         {config: `{"healthzBindAddress":"fd00::1"}`, want: "http://[fd00::1]:10248/healthz"},
		"healthz disabled":     {config: `{"healthzPort":0}`, want: ""},
		"flag wins":            {url: "http://10.0.0.1:1/healthz", config: `{"healthzPort":0}`, want: "http://10.0.0.1:1/healthz"},
		"bind address no IP":   {config: `{"healthzBindAddress":"localhost"}`, wantErr: `expected config: healthzBindAddress "localhost" is not an IP address`},
		"port is not a number": {config: `{"healthzPort":"x"}`, wantErr: `expected config: healthzPort x is not a number`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, err := decodeGeneric([]byte(tc.config))
			if err != nil {
				t.Fatal(err)
			}
			got, err := NewProber(ProberConfig{HealthzURL: tc.url}).healthzURL(cfg)
			if errString(err) != tc.wantErr {
				t.Errorf("error = %q, want %q", errString(err), tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("URL = %q, want %q", got, tc.want)
			}
		})
	}
}
