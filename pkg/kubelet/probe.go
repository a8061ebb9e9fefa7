// The health gate: HealthProber.Probe repeats the three checks (healthz in
// kubeletserver.go, configz in configz.go, Ready in ready.go) until they
// pass or ctx ends, and decides what an apiserver that did not answer means.

package kubelet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/klog/v2"

	"github.com/kubectl-dkc/dkc/pkg/kubeclient"
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
