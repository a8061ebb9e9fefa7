package kubelet

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kubectl-dkc/dkc/pkg/flagz"
	"github.com/kubectl-dkc/dkc/pkg/kubeclient"
)

// agentToken is the bearer token the fake kubelet requires.
const agentToken = "agent-token"

// fakeNode serves what the prober reads: the kubelet's /healthz and /configz
// on a TLS server that requires the agent's token, and the Node and its
// Lease on an apiserver stand-in.
type fakeNode struct {
	mu          sync.Mutex
	healthzCode int
	healthzBody string
	configz     string
	ready       corev1.ConditionStatus
	heartbeat   time.Time
	renew       time.Time
	healthzHits int
	// kubeletCode, when set, answers every kubelet request.
	kubeletCode int
	// apiCode, when set, answers every apiserver request with a Status of
	// that code.
	apiCode int
	// kubeletPaths and apiPaths record the paths asked for.
	kubeletPaths []string
	apiPaths     []string
	// onHealthz runs at each healthz request, under mu.
	onHealthz func(n *fakeNode)
	// cannotAsk, when set, answers every request of the authenticated
	// kubelet server as a real kubelet does when it cannot reach the
	// apiserver: 401 when its TokenReview fails, 500 "Authorization error"
	// when its SubjectAccessReview fails.
	cannotAsk int
	// openPaths records the paths asked of the unauthenticated healthz.
	openPaths []string
	// flagz is the structured /flagz; empty: not served (404).
	flagz string
}

// open serves the kubelet's unauthenticated healthz (healthzPort).
func (f *fakeNode) open(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.openPaths = append(f.openPaths, r.URL.Path)
	if r.URL.Path != "/healthz" {
		http.NotFound(w, r)
		return
	}
	w.WriteHeader(f.healthzCode)
	fmt.Fprint(w, f.healthzBody)
}

func (f *fakeNode) kubelet(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kubeletPaths = append(f.kubeletPaths, r.URL.Path)
	if r.Header.Get("Authorization") != "Bearer "+agentToken {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	switch f.cannotAsk {
	case http.StatusUnauthorized:
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	case http.StatusInternalServerError:
		http.Error(w, "Authorization error (user=system:serviceaccount:kube-system:dkc-agent, verb=get, resource=nodes, subresource="+strings.TrimPrefix(r.URL.Path, "/")+")", http.StatusInternalServerError)
		return
	}
	if f.kubeletCode != 0 {
		http.Error(w, "Forbidden (user=system:serviceaccount:kube-system:dkc-agent, verb=get, resource=nodes, subresource(s)=[healthz proxy])", f.kubeletCode)
		return
	}
	switch r.URL.Path {
	case "/healthz":
		f.healthzHits++
		if f.onHealthz != nil {
			f.onHealthz(f)
		}
		w.WriteHeader(f.healthzCode)
		fmt.Fprint(w, f.healthzBody)
	case "/configz":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, f.configz)
	case "/flagz":
		if f.flagz == "" {
			http.NotFound(w, r)
			return
		}
		if !strings.HasPrefix(r.Header.Get("Accept"), "application/json;as=Flagz") {
			fmt.Fprint(w, "kubelet flags\nmax-pods=42\n") // the text form
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, f.flagz)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeNode) apiserver(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.apiPaths = append(f.apiPaths, r.URL.Path)
	w.Header().Set("Content-Type", "application/json")
	if f.apiCode != 0 {
		st := &metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusFailure, Code: int32(f.apiCode),
			Reason:  metav1.StatusReasonServiceUnavailable,
			Message: "the server is currently unable to handle the request",
		}
		if f.apiCode == http.StatusForbidden {
			st.Reason, st.Message = metav1.StatusReasonForbidden, `nodes "n1" is forbidden: User "x" cannot get resource "nodes"`
		}
		w.WriteHeader(f.apiCode)
		_ = json.NewEncoder(w).Encode(st)
		return
	}
	var obj any
	switch r.URL.Path {
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

// fakeServers are the running stand-ins of a fakeNode.
type fakeServers struct {
	kubelet, api *httptest.Server
	// caFile holds the kubelet's serving certificate.
	caFile string
}

func startFakeNode(t *testing.T, n *fakeNode) *fakeServers {
	t.Helper()
	kl := httptest.NewTLSServer(http.HandlerFunc(n.kubelet))
	t.Cleanup(kl.Close)
	api := httptest.NewServer(http.HandlerFunc(n.apiserver))
	t.Cleanup(api.Close)
	caFile := filepath.Join(t.TempDir(), "kubelet.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kl.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return &fakeServers{kubelet: kl, api: api, caFile: caFile}
}

// startOpenHealthz serves n's unauthenticated healthz, and returns its
// server with its host and port.
func startOpenHealthz(t *testing.T, n *fakeNode) (srv *httptest.Server, host, port string) {
	t.Helper()
	srv = httptest.NewServer(http.HandlerFunc(n.open))
	t.Cleanup(srv.Close)
	host, port, err := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	return srv, host, port
}

// prober returns a prober of node n1 on s, as the agent with its token.
func (s *fakeServers) prober(t *testing.T) *HealthProber {
	t.Helper()
	client, err := kubeclient.NewForConfig(&rest.Config{Host: s.api.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := NewKubeletClient(&rest.Config{Host: s.api.URL, BearerToken: agentToken}, KubeletTLS{CAFile: s.caFile})
	if err != nil {
		t.Fatal(err)
	}
	return NewProber(ProberConfig{Client: client, NodeName: "n1", KubeletURL: s.kubelet.URL, KubeletClient: kc, Interval: 10 * time.Millisecond})
}

func TestProbe(t *testing.T) {
	const wantCfg = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 42\nsyncFrequency: 60s\n"
	tests := map[string]struct {
		edit    func(n *fakeNode)
		want    string // config
		settle  time.Duration
		wantErr string // with URL for the kubelet's URL
	}{
		"healthy": {},
		"healthz fails": {
			edit: func(n *fakeNode) {
				n.healthzCode, n.healthzBody = http.StatusInternalServerError, "[-]syncloop failed\n"
			},
			wantErr: `health gate: healthz: GET URL/healthz: 500 Internal Server Error: "[-]syncloop failed"`,
		},
		"healthz answers something else": {
			edit:    func(n *fakeNode) { n.healthzBody = "maybe" },
			wantErr: `health gate: healthz: GET URL/healthz: 200 OK: "maybe"`,
		},
		"the kubelet forbids the agent": {
			edit:    func(n *fakeNode) { n.kubeletCode = http.StatusForbidden },
			wantErr: `health gate: healthz: GET URL/healthz: 403 Forbidden: "Forbidden (user=system:serviceaccount:kube-system:dkc-agent, verb=get, resource=nodes, subresource(s)=[healthz proxy])"`,
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
			s := startFakeNode(t, n)
			p := s.prober(t)
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
			if got := strings.ReplaceAll(errString(err), s.kubelet.URL, "URL"); got != tc.wantErr {
				t.Errorf("error = %q, want %q", got, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrHealthGate) {
				t.Errorf("error does not wrap ErrHealthGate")
			}
		})
	}
}

// TestProbeAsksTheKubeletDirectly proves that healthz and configz come from
// the kubelet's own server, with the agent's token, and that nothing goes
// through the apiserver's node proxy (which needs nodes/proxy).
func TestProbeAsksTheKubeletDirectly(t *testing.T) {
	n := healthyNode()
	s := startFakeNode(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.prober(t).Probe(ctx, Expectation{Config: []byte(`{"maxPods":42}`), Since: since}); err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if diff := cmp.Diff([]string{"/healthz", "/configz"}, n.kubeletPaths); diff != "" {
		t.Errorf("kubelet paths (-want +got):\n%s", diff)
	}
	want := []string{"/api/v1/nodes/n1", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"}
	if diff := cmp.Diff(want, n.apiPaths); diff != "" {
		t.Errorf("apiserver paths (-want +got):\n%s", diff)
	}
}

// TestProbeApiserverAway pins the gate's rule for an apiserver that does not
// answer: a kubelet whose healthz and configz pass is kept when the gate's
// time ends, while a kubelet that fails its own checks, or that the
// apiserver reports NotReady, still fails.
func TestProbeApiserverAway(t *testing.T) {
	const timeout = 300 * time.Millisecond
	tests := map[string]struct {
		edit func(n *fakeNode)
		// down closes the apiserver; otherwise edit sets its answer.
		down bool
		// cancel cancels the context instead of letting it time out.
		cancel  bool
		wantErr string // URL for the kubelet's URL
	}{
		"apiserver down, kubelet healthy: kept": {down: true},
		"apiserver 503, kubelet healthy: kept": {
			edit: func(n *fakeNode) { n.apiCode = http.StatusServiceUnavailable },
		},
		"apiserver 429, kubelet healthy: kept": {
			edit: func(n *fakeNode) { n.apiCode = http.StatusTooManyRequests },
		},
		"apiserver down, healthz fails": {
			down:    true,
			edit:    func(n *fakeNode) { n.healthzCode, n.healthzBody = http.StatusInternalServerError, "[-]syncloop failed" },
			wantErr: `health gate: healthz: GET URL/healthz: 500 Internal Server Error: "[-]syncloop failed"`,
		},
		"apiserver down, configz differs": {
			down:    true,
			edit:    func(n *fakeNode) { n.configz = `{"kubeletconfig":{"maxPods":110}}` },
			wantErr: "health gate: configz: maxPods is 110, want 42",
		},
		"apiserver answers Forbidden": {
			edit:    func(n *fakeNode) { n.apiCode = http.StatusForbidden },
			wantErr: `health gate: node: nodes "n1" is forbidden: User "x" cannot get resource "nodes"`,
		},
		"apiserver answers NotReady": {
			edit:    func(n *fakeNode) { n.ready = corev1.ConditionFalse },
			wantErr: "health gate: node: Ready is False: KubeletNotReady: container runtime is down",
		},
		"apiserver down, the agent stops": {
			down:    true,
			cancel:  true,
			wantErr: "health gate: node: Get \"API/api/v1/nodes/n1\": dial tcp ADDR: connect: connection refused",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := healthyNode()
			if tc.edit != nil {
				tc.edit(n)
			}
			s := startFakeNode(t, n)
			p := s.prober(t)
			apiURL := s.api.URL
			if tc.down {
				s.api.Close()
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			if tc.cancel {
				time.AfterFunc(timeout/2, cancel)
			}
			// The deadline was fixed when ctx was made, before Probe began:
			// compare the end with it, not with a clock started later.
			deadline, _ := ctx.Deadline()
			err := p.Probe(ctx, Expectation{Config: []byte(`{"maxPods":42}`), Since: since})
			early := deadline.Sub(time.Now())
			got := strings.NewReplacer(s.kubelet.URL, "URL", apiURL, "API", strings.TrimPrefix(apiURL, "http://"), "ADDR").Replace(errString(err))
			if got != tc.wantErr {
				t.Errorf("error = %q, want %q", got, tc.wantErr)
			}
			if tc.wantErr == "" && early > 0 {
				t.Errorf("Probe passed %s before its deadline, want it to wait for the apiserver until the deadline", early)
			}
		})
	}
}

// TestProbeKubeletCannotAsk pins the gate's rule for a kubelet that cannot
// check the agent's credential because the apiserver is away (the kubelet
// answers 401 or 500 "Authorization error"): its unauthenticated healthz
// stands in for the authenticated one, configz stays unverified, and the
// gate passes at its deadline when the apiserver gives no answer either. A
// failing healthz, a kubelet that refuses the agent (403), and an apiserver
// that answers still fail.
func TestProbeKubeletCannotAsk(t *testing.T) {
	const timeout = 300 * time.Millisecond
	tests := map[string]struct {
		edit func(n *fakeNode)
		// down closes the apiserver.
		down bool
		// noOpen sets healthzPort 0: no unauthenticated healthz.
		noOpen  bool
		wantErr string // URL for the kubelet's URL, OPEN for the open healthz's
		// wantOpen is whether the open healthz was asked.
		wantOpen bool
	}{
		"authorization error, apiserver down, healthz ok: kept": {
			edit:     func(n *fakeNode) { n.cannotAsk = http.StatusInternalServerError },
			down:     true,
			wantOpen: true,
		},
		"authentication error, apiserver down, healthz ok: kept": {
			edit:     func(n *fakeNode) { n.cannotAsk = http.StatusUnauthorized },
			down:     true,
			wantOpen: true,
		},
		"authorization error, apiserver down, healthz fails": {
			edit: func(n *fakeNode) {
				n.cannotAsk = http.StatusInternalServerError
				n.healthzCode, n.healthzBody = http.StatusInternalServerError, "[-]syncloop failed"
			},
			down:     true,
			wantErr:  `health gate: healthz: GET OPEN/healthz: 500 Internal Server Error: "[-]syncloop failed"`,
			wantOpen: true,
		},
		"authorization error, apiserver down, no open healthz": {
			edit:    func(n *fakeNode) { n.cannotAsk = http.StatusInternalServerError },
			down:    true,
			noOpen:  true,
			wantErr: `health gate: healthz: GET URL/healthz: 500 Internal Server Error: "Authorization error (user=system:serviceaccount:kube-system:dkc-agent, verb=get, resource=nodes, subresource=healthz)"`,
		},
		"authorization error, apiserver answers": {
			edit:     func(n *fakeNode) { n.cannotAsk = http.StatusInternalServerError },
			wantErr:  `health gate: configz: GET URL/configz: 500 Internal Server Error: "Authorization error (user=system:serviceaccount:kube-system:dkc-agent, verb=get, resource=nodes, subresource=configz)"`,
			wantOpen: true,
		},
		"kubelet forbids, apiserver down": {
			edit:    func(n *fakeNode) { n.kubeletCode = http.StatusForbidden },
			down:    true,
			wantErr: `health gate: healthz: GET URL/healthz: 403 Forbidden: "Forbidden (user=system:serviceaccount:kube-system:dkc-agent, verb=get, resource=nodes, subresource(s)=[healthz proxy])"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := healthyNode()
			if tc.edit != nil {
				tc.edit(n)
			}
			s := startFakeNode(t, n)
			open, host, port := startOpenHealthz(t, n)
			if tc.noOpen {
				port = "0"
			}
			cfg := fmt.Sprintf(`{"maxPods":42,"healthzBindAddress":%q,"healthzPort":%s}`, host, port)
			p := s.prober(t)
			if tc.down {
				s.api.Close()
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			deadline, _ := ctx.Deadline()
			err := p.Probe(ctx, Expectation{Config: []byte(cfg), Since: since})
			early := deadline.Sub(time.Now())
			got := strings.NewReplacer(s.kubelet.URL, "URL", open.URL, "OPEN").Replace(errString(err))
			if got != tc.wantErr {
				t.Errorf("error = %q, want %q", got, tc.wantErr)
			}
			if tc.wantErr == "" && early > 0 {
				t.Errorf("Probe passed %s before its deadline, want it to wait for the apiserver until the deadline", early)
			}
			n.mu.Lock()
			defer n.mu.Unlock()
			if asked := len(n.openPaths) > 0; asked != tc.wantOpen {
				t.Errorf("open healthz asked = %t (%v), want %t", asked, n.openPaths, tc.wantOpen)
			}
		})
	}
}

// TestProbeRetries proves Probe keeps trying until the kubelet is healthy,
// and that a short apiserver outage ends with the full check: the gate
// passes as soon as the apiserver answers, well before its deadline.
func TestProbeRetries(t *testing.T) {
	tests := map[string]struct {
		fail, heal func(n *fakeNode)
	}{
		"healthz fails twice": {
			fail: func(n *fakeNode) { n.healthzCode = http.StatusServiceUnavailable },
			heal: func(n *fakeNode) { n.healthzCode = http.StatusOK },
		},
		"apiserver away twice": {
			fail: func(n *fakeNode) { n.apiCode = http.StatusServiceUnavailable },
			heal: func(n *fakeNode) { n.apiCode = 0 },
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := healthyNode()
			tc.fail(n)
			n.onHealthz = func(n *fakeNode) {
				if n.healthzHits == 3 {
					tc.heal(n)
				}
			}
			s := startFakeNode(t, n)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			began := time.Now()
			if err := s.prober(t).Probe(ctx, Expectation{Config: []byte(`{"maxPods":42}`), Since: since}); err != nil {
				t.Fatal(err)
			}
			if took := time.Since(began); took > 2*time.Second {
				t.Errorf("Probe took %s, want it to pass at the third attempt", took)
			}
			n.mu.Lock()
			defer n.mu.Unlock()
			if n.healthzHits != 3 {
				t.Errorf("healthz asked %d times, want 3", n.healthzHits)
			}
		})
	}
}

func TestKubeletURL(t *testing.T) {
	tests := map[string]struct {
		url     string
		config  string
		want    string
		wantErr string
	}{
		"defaults":             {config: `{}`, want: "https://127.0.0.1:10250"},
		"address, port":        {config: `{"address":"198.51.100.11","port":10300}`, want: "https://198.51.100.11:10300"},
		"unspecified address":  {config: `{"address":"0.0.0.0"}`, want: "https://127.0.0.1:10250"},
		"IPv6 address":         {config: `{"address":"fd00::1"}`, want: "https://[fd00::1]:10250"},
		"healthz port ignored": {config: `{"healthzBindAddress":"198.51.100.12","healthzPort":0}`, want: "https://127.0.0.1:10250"},
		"flag wins":            {url: "https://10.0.0.1:1/", config: `{"address":"198.51.100.11"}`, want: "https://10.0.0.1:1"},
		"address no IP":        {config: `{"address":"localhost"}`, wantErr: `expected config: address "localhost" is not an IP address`},
		"port is not a number": {config: `{"port":"x"}`, wantErr: `expected config: port x is not a number`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, err := decodeGeneric([]byte(tc.config))
			if err != nil {
				t.Fatal(err)
			}
			got, err := NewProber(ProberConfig{KubeletURL: tc.url}).kubeletURL(cfg)
			if errString(err) != tc.wantErr {
				t.Errorf("error = %q, want %q", errString(err), tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("URL = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestOpenHealthzURL(t *testing.T) {
	tests := map[string]struct {
		config  string
		want    string
		wantErr string
	}{
		"defaults":             {config: `{}`, want: "http://127.0.0.1:10248/healthz"},
		"address, port":        {config: `{"healthzBindAddress":"198.51.100.12","healthzPort":10300}`, want: "http://198.51.100.12:10300/healthz"},
		"unspecified address":  {config: `{"healthzBindAddress":"0.0.0.0"}`, want: "http://127.0.0.1:10248/healthz"},
		"IPv6 address":         {config: `{"healthzBindAddress":"fd00::1"}`, want: "http://[fd00::1]:10248/healthz"},
		"port 0: none":         {config: `{"healthzBindAddress":"198.51.100.12","healthzPort":0}`, want: ""},
		"address no IP":        {config: `{"healthzBindAddress":"localhost"}`, wantErr: `expected config: healthzBindAddress "localhost" is not an IP address`},
		"port is not a number": {config: `{"healthzPort":"x"}`, wantErr: `expected config: healthzPort x is not a number`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, err := decodeGeneric([]byte(tc.config))
			if err != nil {
				t.Fatal(err)
			}
			got, err := openHealthzURL(cfg)
			if errString(err) != tc.wantErr {
				t.Errorf("error = %q, want %q", errString(err), tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("URL = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestNewKubeletClient proves the kubelet's serving certificate is verified
// unless skipping is asked for, and that the agent's credential is sent.
func TestNewKubeletClient(t *testing.T) {
	n := healthyNode()
	s := startFakeNode(t, n)
	otherCA := writeOtherCA(t)
	agent := &rest.Config{Host: "https://apiserver.invalid", BearerToken: agentToken}
	tests := map[string]struct {
		cfg     *rest.Config
		tls     KubeletTLS
		wantErr string
	}{
		"kubelet CA":                   {cfg: agent, tls: KubeletTLS{CAFile: s.caFile}},
		"kubelet CA, name in the cert": {cfg: agent, tls: KubeletTLS{CAFile: s.caFile, ServerName: "example.com"}},
		"kubelet CA, wrong name": {cfg: agent, tls: KubeletTLS{CAFile: s.caFile, ServerName: "dkc-node-1"},
			wantErr: "tls: failed to verify certificate: x509: certificate is valid for example.com, *.example.com, not dkc-node-1"},
		"another CA": {cfg: agent, tls: KubeletTLS{CAFile: otherCA},
			wantErr: "tls: failed to verify certificate: x509: certificate signed by unknown authority"},
		"the REST config's CA by default": {cfg: &rest.Config{BearerToken: agentToken, TLSClientConfig: rest.TLSClientConfig{CAFile: otherCA, ServerName: "kubernetes"}},
			wantErr: "tls: failed to verify certificate: x509: certificate signed by unknown authority"},
		"insecure, when asked": {cfg: &rest.Config{BearerToken: agentToken, TLSClientConfig: rest.TLSClientConfig{CAFile: otherCA}}, tls: KubeletTLS{Insecure: true}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client, err := NewKubeletClient(tc.cfg, tc.tls)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Get(s.kubelet.URL + "/healthz")
			var got string
			if err != nil {
				var uerr *url.Error
				if !errors.As(err, &uerr) {
					t.Fatalf("error %v is no *url.Error", err)
				}
				got = uerr.Err.Error()
			} else {
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("status = %s, want 200: the token was not sent", resp.Status)
				}
			}
			if got != tc.wantErr {
				t.Errorf("error = %q, want %q", got, tc.wantErr)
			}
		})
	}
}

// writeOtherCA writes a CA certificate that signed nothing the tests serve.
func writeOtherCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "other-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "other-ca.crt")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestProbeRunning proves that Expectation.Running is called exactly once,
// and only when the kubelet itself showed healthz passing and configz
// matching: not for a kubelet that fails either, and not for a configz the
// probe could not verify.
func TestProbeRunning(t *testing.T) {
	tests := map[string]struct {
		edit func(n *fakeNode)
		// down closes the apiserver.
		down        bool
		wantRunning int
		wantPass    bool
	}{
		"healthy":         {wantRunning: 1, wantPass: true},
		"never Ready":     {edit: func(n *fakeNode) { n.ready = corev1.ConditionFalse }, wantRunning: 1},
		"apiserver away":  {down: true, wantRunning: 1, wantPass: true},
		"configz differs": {edit: func(n *fakeNode) { n.configz = `{"kubeletconfig":{"maxPods":110}}` }},
		"healthz fails": {edit: func(n *fakeNode) {
			n.healthzCode, n.healthzBody = http.StatusInternalServerError, "[-]syncloop failed"
		}},
		"configz unverified": {edit: func(n *fakeNode) { n.cannotAsk = http.StatusInternalServerError }, down: true, wantPass: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := healthyNode()
			_, host, port := startOpenHealthz(t, n)
			n.configz = fmt.Sprintf(`{"kubeletconfig":{"maxPods":42,"healthzBindAddress":%q,"healthzPort":%s}}`, host, port)
			if tc.edit != nil {
				tc.edit(n)
			}
			s := startFakeNode(t, n)
			p := s.prober(t)
			if tc.down {
				s.api.Close()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			calls := 0
			cfg := fmt.Sprintf(`{"maxPods":42,"healthzBindAddress":%q,"healthzPort":%s}`, host, port)
			err := p.Probe(ctx, Expectation{Config: []byte(cfg), Since: since, Running: func() { calls++ }})
			if pass := err == nil; pass != tc.wantPass {
				t.Errorf("Probe passed = %t (%v), want %t", pass, err, tc.wantPass)
			}
			if calls != tc.wantRunning {
				t.Errorf("Running called %d times, want %d", calls, tc.wantRunning)
			}
			n.mu.Lock()
			defer n.mu.Unlock()
			if tc.wantRunning == 1 && n.healthzHits < 2 && !tc.wantPass {
				t.Errorf("healthz asked %d times, want several attempts", n.healthzHits)
			}
		})
	}
}

// TestFlags reads the kubelet's /flagz in its structured form; a kubelet
// that does not serve it is flagz.ErrNotServed.
func TestFlags(t *testing.T) {
	n := healthyNode()
	n.flagz = `{"kind":"Flagz","apiVersion":"config.k8s.io/v1beta1","flags":{"max-pods":"42","v":"2"}}`
	s := startFakeNode(t, n)
	got, err := s.prober(t).Flags(context.Background(), []byte(`{"maxPods":110}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"max-pods": "42", "v": "2"}, got); diff != "" {
		t.Errorf("flags (-want +got):\n%s", diff)
	}
	n.mu.Lock()
	n.flagz = ""
	n.mu.Unlock()
	if _, err := s.prober(t).Flags(context.Background(), []byte(`{"maxPods":110}`)); !errors.Is(err, flagz.ErrNotServed) {
		t.Errorf("a kubelet without /flagz: %v, want flagz.ErrNotServed", err)
	}
}

// TestRunning reads the kubelet's configz once, as it answers it.
func TestRunning(t *testing.T) {
	n := healthyNode()
	s := startFakeNode(t, n)
	got, err := s.prober(t).Running(context.Background(), []byte(`{"maxPods":110}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(`{"maxPods":42,"syncFrequency":"1m0s","healthzPort":10248}`, string(got)); diff != "" {
		t.Errorf("running config (-want +got):\n%s", diff)
	}

	n.mu.Lock()
	n.kubeletCode = http.StatusForbidden
	n.mu.Unlock()
	if _, err := s.prober(t).Running(context.Background(), []byte(`{"maxPods":110}`)); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("Running on a kubelet that answers 403: %v, want the 403", err)
	}
}
