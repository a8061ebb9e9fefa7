package kubelet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/pkg/configz"
)

const (
	// DefaultProbeInterval is how long Probe waits between attempts.
	DefaultProbeInterval = 500 * time.Millisecond
	// attemptTimeout bounds each request of an attempt.
	attemptTimeout = 5 * time.Second
	// maxMismatches is how many differing fields an error names.
	maxMismatches = 3
	// nodeLeaseNamespace holds the kubelets' Leases.
	nodeLeaseNamespace = "kube-node-lease"
)

// ErrHealthGate is wrapped by every error of HealthProber.Probe.
var ErrHealthGate = errors.New("health gate")

// ProberConfig configures NewProber.
type ProberConfig struct {
	// Client reads the Node, its Lease, and configz through the node proxy
	// (get nodes, get nodes/proxy, get leases in kube-node-lease).
	Client kubernetes.Interface
	// NodeName is the node whose kubelet is probed.
	NodeName string
	// HealthzURL is the kubelet's healthz endpoint. When empty, it is made
	// from the expected config's healthzBindAddress and healthzPort
	// (defaults 127.0.0.1 and 10248; an unspecified address means
	// 127.0.0.1), and a healthzPort of 0 skips the check.
	HealthzURL string
	// Interval is the wait between attempts; default DefaultProbeInterval.
	Interval time.Duration
	// HTTPClient reaches healthz; default a client without proxy.
	HTTPClient *http.Client
}

// HealthProber is the Prober of a real kubelet.
type HealthProber struct {
	cfg ProberConfig
	// settle is how long an ambiguous Ready heartbeat must wait; see
	// checkReady.
	settle time.Duration
	now    func() time.Time
}

// readySettle is the default HealthProber.settle.
const readySettle = 2 * time.Second

var _ Prober = &HealthProber{}

// NewProber returns a Prober for the kubelet of cfg.NodeName.
func NewProber(cfg ProberConfig) *HealthProber {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultProbeInterval
	}
	if cfg.HTTPClient == nil {
		// No proxy from the environment: healthz is on the node itself.
		cfg.HTTPClient = &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	}
	return &HealthProber{cfg: cfg, settle: readySettle, now: time.Now}
}

// Probe checks, at every Interval until all three hold at once or ctx ends:
//
//  1. healthz answers 200 "ok";
//  2. configz shows, for every field want.Config sets, the same value (see
//     CompareConfig);
//  3. the Node's Ready condition is True, reported by a kubelet that started
//     after want.Since: its Lease was renewed after want.Since, and the Ready
//     condition's heartbeat is later (see checkReady for heartbeats in the
//     same second).
//
// When ctx ends first, the error wraps ErrHealthGate and names the last check
// that failed, with its detail, such as "health gate: configz: maxPods is 110,
// want 42".
func (p *HealthProber) Probe(ctx context.Context, want Expectation) error {
	wantCfg, err := decodeGeneric(want.Config)
	if err != nil {
		return fmt.Errorf("%w: expected config: %w", ErrHealthGate, err)
	}
	healthz, err := p.healthzURL(wantCfg)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrHealthGate, err)
	}
	st := &readyState{since: want.Since}
	var last error
	for {
		err := p.attempt(ctx, healthz, wantCfg, st)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			// An attempt cut short by ctx says less than a complete one.
			if last == nil {
				last = err
			}
			return fmt.Errorf("%w: %w", ErrHealthGate, last)
		}
		last = err
		t := time.NewTimer(p.cfg.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %w", ErrHealthGate, last)
		case <-t.C:
		}
	}
}

func (p *HealthProber) attempt(ctx context.Context, healthz string, want map[string]any, st *readyState) error {
	if healthz != "" {
		if err := p.checkHealthz(ctx, healthz); err != nil {
			return fmt.Errorf("healthz: %w", err)
		}
	}
	if err := p.checkConfigz(ctx, want); err != nil {
		return fmt.Errorf("configz: %w", err)
	}
	if err := p.checkReady(ctx, st); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	return nil
}

func (p *HealthProber) healthzURL(want map[string]any) (string, error) {
	if p.cfg.HealthzURL != "" {
		return p.cfg.HealthzURL, nil
	}
	host := "127.0.0.1"
	if s, ok := want["healthzBindAddress"].(string); ok && s != "" {
		ip := net.ParseIP(s)
		if ip == nil {
			return "", fmt.Errorf("expected config: healthzBindAddress %q is not an IP address", s)
		}
		if !ip.IsUnspecified() {
			host = s
		}
	}
	port := "10248"
	if v, ok := want["healthzPort"]; ok && v != nil {
		n, ok := v.(json.Number)
		if !ok {
			return "", fmt.Errorf("expected config: healthzPort %v is not a number", v)
		}
		if n.String() == "0" {
			return "", nil // healthz disabled
		}
		port = n.String()
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}

func (p *HealthProber) checkHealthz(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := p.cfg.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	body = bytes.TrimSpace(body)
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		return fmt.Errorf("GET %s: %s: %q", url, resp.Status, body)
	}
	return nil
}

func (p *HealthProber) checkConfigz(ctx context.Context, want map[string]any) error {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	raw, err := configz.Fetch(ctx, p.cfg.Client.CoreV1().RESTClient(), p.cfg.NodeName)
	if err != nil {
		return err
	}
	var resp struct {
		KubeletConfig json.RawMessage `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	if len(resp.KubeletConfig) == 0 || string(resp.KubeletConfig) == "null" {
		return configz.ErrNoKubeletConfig
	}
	got, err := decodeGeneric(resp.KubeletConfig)
	if err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	return mismatchError(compareConfig(want, got))
}

// readyState is what checkReady remembers across one Probe's attempts.
type readyState struct {
	since time.Time
	// leaseSeen is when this Probe first saw the Lease renewed after since.
	leaseSeen time.Time
}

// checkReady requires Ready=True, reported by a kubelet that started after
// since.
//
// The Lease's renewTime has microseconds: a renewal after since proves a
// kubelet runs that started after it. The Ready condition's heartbeat has
// whole seconds: one in a later second than since is fresh, one in an earlier
// second is stale, and one in since's own second may be either. A kubelet
// always posts its status right after it starts (within about a second of
// its first Lease renewal, measured), so an ambiguous heartbeat counts once
// readySettle passed since the renewal was first seen: by then a fresh status
// would have replaced a stale one, or shown NotReady.
func (p *HealthProber) checkReady(ctx context.Context, st *readyState) error {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	node, err := p.cfg.Client.CoreV1().Nodes().Get(ctx, p.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	var ready *corev1.NodeCondition
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			ready = &node.Status.Conditions[i]
		}
	}
	if ready == nil {
		return errors.New("no Ready condition")
	}
	if ready.Status != corev1.ConditionTrue {
		return fmt.Errorf("Ready is %s: %s: %s", ready.Status, ready.Reason, ready.Message)
	}
	since := st.since
	if since.IsZero() {
		return nil
	}
	lease, err := p.cfg.Client.CoordinationV1().Leases(nodeLeaseNamespace).Get(ctx, p.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	if renew := leaseRenewTime(lease); !renew.After(since) {
		return fmt.Errorf("lease renewed at %s, not after the restart at %s",
			renew.UTC().Format(time.RFC3339Nano), since.UTC().Format(time.RFC3339Nano))
	}
	now := p.now()
	if st.leaseSeen.IsZero() {
		st.leaseSeen = now
	}
	heartbeat := ready.LastHeartbeatTime.Time
	switch {
	case heartbeat.After(since):
		return nil
	case heartbeat.Before(since.Truncate(time.Second)):
		return fmt.Errorf("Ready heartbeat %s is from before the restart at %s",
			heartbeat.UTC().Format(time.RFC3339), since.UTC().Format(time.RFC3339Nano))
	case now.Sub(st.leaseSeen) < p.settle:
		return fmt.Errorf("Ready heartbeat %s is from the second of the restart at %s; waiting up to %s for a later one",
			heartbeat.UTC().Format(time.RFC3339), since.UTC().Format(time.RFC3339Nano), p.settle)
	}
	return nil
}

func leaseRenewTime(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}

// decodeGeneric decodes a YAML or JSON object, keeping numbers as
// json.Number.
func decodeGeneric(data []byte) (map[string]any, error) {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("not an object")
	}
	return m, nil
}

// mismatchError names the first few mismatches, or returns nil.
func mismatchError(ms []string) error {
	if len(ms) == 0 {
		return nil
	}
	var b bytes.Buffer
	for i, m := range ms {
		if i == maxMismatches {
			b.WriteString("; and " + strconv.Itoa(len(ms)-maxMismatches) + " more")
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(m)
	}
	return errors.New(b.String())
}
