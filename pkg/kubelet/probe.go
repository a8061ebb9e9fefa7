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
	"net/url"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/pkg/kubeclient"
	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
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
	// DefaultKubeletPort is the kubelet's authenticated server port.
	DefaultKubeletPort = "10250"
	// defaultHealthzPort is the kubelet's unauthenticated healthz port.
	defaultHealthzPort = "10248"
)

// ErrHealthGate is wrapped by every error of HealthProber.Probe.
var ErrHealthGate = errors.New("health gate")

// ProberConfig configures NewProber.
type ProberConfig struct {
	// Client reads the Node and its Lease from the apiserver (get nodes,
	// get leases in kube-node-lease).
	Client kubeclient.Interface
	// NodeName is the node whose kubelet is probed.
	NodeName string
	// KubeletURL is the base URL of the kubelet's authenticated server,
	// where the probe reads /healthz and /configz directly, not through the
	// apiserver's node proxy. When empty, it is made from the expected
	// config's address and port: https://ADDRESS:PORT (defaults 127.0.0.1
	// and 10250; an unspecified address means 127.0.0.1).
	KubeletURL string
	// KubeletClient reaches KubeletURL. It must authenticate as the agent
	// and verify the kubelet's serving certificate; see NewKubeletClient.
	// The kubelet authorizes each request by a SubjectAccessReview: get on
	// nodes/healthz and nodes/configz with fine-grained kubelet
	// authorization (1.33+), get on nodes/proxy without it.
	KubeletClient *http.Client
	// Interval is the wait between attempts; default DefaultProbeInterval.
	Interval time.Duration
}

// KubeletTLS says how the agent verifies the kubelet's serving certificate.
type KubeletTLS struct {
	// CAFile holds the CA certificates to trust. Default: the CA of the
	// agent's own REST config (the cluster CA, which signs kubelet serving
	// certificates issued through serverTLSBootstrap). A kubelet with a
	// self-signed certificate is verified with that certificate itself: its
	// --cert-dir's kubelet.crt.
	CAFile string
	// ServerName is the name the certificate must carry. Default: the host
	// of the kubelet URL. A self-signed kubelet certificate names the node's
	// hostname, not its address.
	ServerName string
	// Insecure skips verification: the agent's credential then goes to
	// whoever answers at the kubelet's address. Only when set explicitly.
	Insecure bool
}

// NewKubeletClient returns an HTTP client for the kubelet's authenticated
// server that presents the credential of cfg (the agent's: a bearer token,
// re-read from its file as it rotates, or a client certificate) and verifies
// the kubelet as tlsCfg says. It uses no proxy.
func NewKubeletClient(cfg *rest.Config, tlsCfg KubeletTLS) (*http.Client, error) {
	c := rest.CopyConfig(cfg)
	c.TLSClientConfig.ServerName = tlsCfg.ServerName
	switch {
	case tlsCfg.Insecure:
		c.TLSClientConfig.Insecure = true
		c.TLSClientConfig.CAFile, c.TLSClientConfig.CAData = "", nil
	case tlsCfg.CAFile != "":
		c.TLSClientConfig.Insecure = false
		c.TLSClientConfig.CAFile, c.TLSClientConfig.CAData = tlsCfg.CAFile, nil
	}
	c.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	c.Timeout = 0
	client, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("kubelet client: %w", err)
	}
	return client, nil
}

// HealthProber is the Prober of a real kubelet.
type HealthProber struct {
	cfg ProberConfig
	// settle is how long an ambiguous Ready heartbeat must wait; see
	// checkReady.
	settle time.Duration
	now    func() time.Time
	// open reaches the kubelet's unauthenticated healthz, without the
	// agent's credential.
	open *http.Client
}

// readySettle is the default HealthProber.settle.
const readySettle = 2 * time.Second

var _ Prober = &HealthProber{}

// NewProber returns a Prober for the kubelet of cfg.NodeName.
func NewProber(cfg ProberConfig) *HealthProber {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultProbeInterval
	}
	return &HealthProber{cfg: cfg, settle: readySettle, now: time.Now,
		open: &http.Client{Transport: &http.Transport{Proxy: nil}}}
}

// Probe checks, at every Interval until all three hold at once or ctx ends:
//
//  1. the kubelet's /healthz answers 200 "ok";
//  2. the kubelet's /configz shows, for every field want.Config sets, the
//     same value (see CompareConfig);
//  3. the Node's Ready condition is True, reported by a kubelet that started
//     after want.Since: its Lease was renewed after want.Since, and the Ready
//     condition's heartbeat is later (see checkReady for heartbeats in the
//     same second).
//
// Checks 1 and 2 ask the kubelet itself, at KubeletURL; check 3 asks the
// apiserver. The first attempt where checks 1 and 2 pass calls want.Running,
// if set: from then on the kubelet is known to run want.Config, and only its
// Ready is awaited.
//
// # When the apiserver does not answer
//
// A kubelet is not rolled back only because the apiserver is away: during a
// control-plane upgrade every agent of the fleet would roll back at once.
//
// The kubelet checks the agent's credential with the apiserver (TokenReview,
// SubjectAccessReview), so with the apiserver away it may answer checks 1
// and 2 with 401 or with 500 "Authorization error" (once its caches of
// earlier answers expire). Then:
//
//   - check 1 reads the kubelet's unauthenticated healthz instead, at
//     http://HEALTHZBINDADDRESS:HEALTHZPORT/healthz of the expected config
//     (defaults 127.0.0.1 and 10248; an unspecified address means
//     127.0.0.1). With healthzPort 0 there is none, and check 1 fails.
//   - check 2 is unverified: it counts as passed only while the apiserver
//     gives no answer either (below). If the apiserver answers, the
//     kubelet will soon be able to authorize the agent, so the attempt
//     fails and the next one asks configz again.
//
// When ctx's deadline passes (the agent's --health-timeout) and the last
// complete attempt found healthz passing, configz passing or unverified as
// above, and got no answer from the apiserver for check 3 (no connection, a
// timeout, 429 or a 5xx), Probe returns nil: the gate passes on the
// kubelet's own evidence, and the log says so, naming an unverified configz.
// Until the deadline it keeps waiting for the apiserver, so a short outage
// still ends with the full check. An unverified configz is weaker evidence:
// the kubelet restarted after the write and is healthy, but nothing proved it
// runs the written values; the agent does not re-check them later.
//
// The gate fails only on what the kubelet or the apiserver answered: healthz
// failing (including a kubelet that does not answer at all), configz
// differing or failing otherwise (such as 403 Forbidden), or the apiserver
// reporting the Node not Ready, its Lease or Ready heartbeat stale, or
// refusing the request (such as Forbidden). When ctx is cancelled rather
// than timed out (the agent stopping), Probe fails as well.
//
// When ctx ends with a failure, the error wraps ErrHealthGate and names the
// last check that failed, with its detail, such as "health gate: configz:
// maxPods is 110, want 42".
func (p *HealthProber) Probe(ctx context.Context, want Expectation) error {
	wantCfg, err := decodeGeneric(want.Config)
	if err != nil {
		return fmt.Errorf("%w: expected config: %w", ErrHealthGate, err)
	}
	base, err := p.kubeletURL(wantCfg)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrHealthGate, err)
	}
	if p.cfg.KubeletClient == nil {
		return fmt.Errorf("%w: no client for the kubelet at %s", ErrHealthGate, base)
	}
	open, err := openHealthzURL(wantCfg)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrHealthGate, err)
	}
	st := &readyState{since: want.Since, running: want.Running}
	var last, unverified error
	// away is true when the last complete attempt passed healthz and
	// configz (or left configz unverified), and the apiserver did not
	// answer the Ready check.
	away := false
	end := func() error {
		if !away || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("%w: %w", ErrHealthGate, last)
		}
		log := klog.FromContext(ctx)
		if unverified != nil {
			log.Info("Health gate passed on the kubelet's healthz alone: configz unverified, the kubelet could not check the agent's credential and the apiserver did not answer the Ready check",
				"node", p.cfg.NodeName, "configzError", unverified, "apiserverError", last)
			return nil
		}
		log.Info("Health gate passed on the kubelet's own checks: healthz and configz pass, the apiserver did not answer the Ready check",
			"node", p.cfg.NodeName, "apiserverError", last)
		return nil
	}
	for {
		kubeletOK, unv, err := p.attempt(ctx, base, open, wantCfg, st)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			// An attempt cut short by ctx says less than a complete one.
			if last == nil {
				last = err
			}
			return end()
		}
		last, unverified = err, unv
		away = kubeletOK && apiserverAway(err)
		t := time.NewTimer(p.cfg.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return end()
		case <-t.C:
		}
	}
}

// Running reads the kubelet's /configz once, at the address of current.
func (p *HealthProber) Running(ctx context.Context, current []byte) ([]byte, error) {
	cur, err := decodeGeneric(current)
	if err != nil {
		return nil, fmt.Errorf("current config: %w", err)
	}
	base, err := p.kubeletURL(cur)
	if err != nil {
		return nil, err
	}
	if p.cfg.KubeletClient == nil {
		return nil, fmt.Errorf("no client for the kubelet at %s", base)
	}
	return p.configz(ctx, base+"/configz")
}

// configz returns the kubeletconfig object of the kubelet's /configz at url.
func (p *HealthProber) configz(ctx context.Context, url string) ([]byte, error) {
	resp, raw, err := p.get(ctx, p.cfg.KubeletClient, url)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &kubeletAnswer{url: url, status: resp.Status, code: resp.StatusCode, body: bytes.TrimSpace(raw)}
	}
	var body struct {
		KubeletConfig json.RawMessage `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, fmt.Errorf("decode response: %w", err)
	}
	if len(body.KubeletConfig) == 0 || string(body.KubeletConfig) == "null" {
		return nil, kubeletconfig.ErrNoKubeletConfig
	}
	return body.KubeletConfig, nil
}

// attempt runs the three checks once; open is the unauthenticated healthz
// URL, "" when there is none. kubeletOK reports whether healthz passed and
// configz passed or was left unverified; unverified is why configz was,
// nil when it passed.
func (p *HealthProber) attempt(ctx context.Context, base, open string, want map[string]any, st *readyState) (kubeletOK bool, unverified, err error) {
	if err := p.checkHealthz(ctx, p.cfg.KubeletClient, base+"/healthz"); err != nil {
		if !kubeletCannotAsk(err) || open == "" {
			return false, nil, fmt.Errorf("healthz: %w", err)
		}
		if err := p.checkHealthz(ctx, p.open, open); err != nil {
			return false, nil, fmt.Errorf("healthz: %w", err)
		}
	}
	if err := p.checkConfigz(ctx, base+"/configz", want); err != nil {
		if !kubeletCannotAsk(err) {
			return false, nil, fmt.Errorf("configz: %w", err)
		}
		unverified = fmt.Errorf("configz: %w", err)
	} else if st.running != nil {
		st.running()
		st.running = nil
	}
	if err := p.checkReady(ctx, st); err != nil {
		return true, unverified, fmt.Errorf("node: %w", err)
	}
	if unverified != nil {
		return false, nil, unverified
	}
	return true, nil, nil
}

// kubeletAnswer is a kubelet's HTTP answer that fails a check.
type kubeletAnswer struct {
	url, status string
	code        int
	body        []byte
}

func (e *kubeletAnswer) Error() string {
	return fmt.Sprintf("GET %s: %s: %q", e.url, e.status, e.body)
}

// kubeletCannotAsk reports whether err is the kubelet saying it could not
// check the agent's credential with the apiserver: 401 (a failed
// TokenReview) or 500 "Authorization error" (a failed SubjectAccessReview).
// A 403 is the apiserver's answer, and does not count.
func kubeletCannotAsk(err error) bool {
	var a *kubeletAnswer
	if !errors.As(err, &a) {
		return false
	}
	return a.code == http.StatusUnauthorized ||
		a.code == http.StatusInternalServerError && bytes.HasPrefix(a.body, []byte("Authorization error"))
}

// apiserverAway reports whether err means the apiserver gave no answer:
// no HTTP response at all (connection refused, reset, timeout), 429, or a
// 5xx. Any other status (NotFound, Forbidden) is an answer.
func apiserverAway(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code >= http.StatusInternalServerError || code == http.StatusTooManyRequests
	}
	var answered *answeredError
	return !errors.As(err, &answered)
}

// answeredError is a Ready check that failed on what the apiserver
// answered: the Node not Ready, or its Lease or heartbeat from before the
// restart.
type answeredError struct{ msg string }

func (e *answeredError) Error() string { return e.msg }

func answeredf(format string, args ...any) error {
	return &answeredError{msg: fmt.Sprintf(format, args...)}
}

// kubeletURL is KubeletURL, or https://ADDRESS:PORT of the expected config.
func (p *HealthProber) kubeletURL(want map[string]any) (string, error) {
	if p.cfg.KubeletURL != "" {
		return strings.TrimSuffix(p.cfg.KubeletURL, "/"), nil
	}
	host, port, err := configHostPort(want, "address", "port", DefaultKubeletPort)
	if err != nil {
		return "", err
	}
	return "https://" + net.JoinHostPort(host, port), nil
}

// configHostPort reads an address field and a port field of the expected
// config: the address must be an IP, 127.0.0.1 when unset or unspecified;
// the port is defPort when unset.
func configHostPort(want map[string]any, addrField, portField, defPort string) (host, port string, err error) {
	host = "127.0.0.1"
	if s, ok := want[addrField].(string); ok && s != "" {
		ip := net.ParseIP(s)
		if ip == nil {
			return "", "", fmt.Errorf("expected config: %s %q is not an IP address", addrField, s)
		}
		if !ip.IsUnspecified() {
			host = s
		}
	}
	port = defPort
	if v, ok := want[portField]; ok && v != nil {
		n, ok := v.(json.Number)
		if !ok {
			return "", "", fmt.Errorf("expected config: %s %v is not a number", portField, v)
		}
		port = n.String()
	}
	return host, port, nil
}

// openHealthzURL is http://HEALTHZBINDADDRESS:HEALTHZPORT/healthz of the
// expected config, or "" when its healthzPort is 0.
func openHealthzURL(want map[string]any) (string, error) {
	host, port, err := configHostPort(want, "healthzBindAddress", "healthzPort", defaultHealthzPort)
	if err != nil || port == "0" {
		return "", err
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}

// get reads url with client, at most 64 KiB of it.
func (p *HealthProber) get(ctx context.Context, client *http.Client, url string) (*http.Response, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s: %w", url, err)
	}
	return resp, body, nil
}

func (p *HealthProber) checkHealthz(ctx context.Context, client *http.Client, url string) error {
	resp, body, err := p.get(ctx, client, url)
	if err != nil {
		return err
	}
	body = bytes.TrimSpace(body)
	if len(body) > 1024 {
		body = body[:1024]
	}
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		return &kubeletAnswer{url: url, status: resp.Status, code: resp.StatusCode, body: body}
	}
	return nil
}

func (p *HealthProber) checkConfigz(ctx context.Context, url string, want map[string]any) error {
	running, err := p.configz(ctx, url)
	if err != nil {
		return err
	}
	got, err := decodeGeneric(running)
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
	// running is Expectation.Running until it has been called.
	running func()
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
	node, err := p.cfg.Client.Nodes().Get(ctx, p.cfg.NodeName, metav1.GetOptions{})
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
		return answeredf("no Ready condition")
	}
	if ready.Status != corev1.ConditionTrue {
		return answeredf("Ready is %s: %s: %s", ready.Status, ready.Reason, ready.Message)
	}
	since := st.since
	if since.IsZero() {
		return nil
	}
	lease, err := p.cfg.Client.Leases(nodeLeaseNamespace).Get(ctx, p.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	if renew := leaseRenewTime(lease); !renew.After(since) {
		return answeredf("lease renewed at %s, not after the restart at %s",
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
		return answeredf("Ready heartbeat %s is from before the restart at %s",
			heartbeat.UTC().Format(time.RFC3339), since.UTC().Format(time.RFC3339Nano))
	case now.Sub(st.leaseSeen) < p.settle:
		return answeredf("Ready heartbeat %s is from the second of the restart at %s; waiting up to %s for a later one",
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
