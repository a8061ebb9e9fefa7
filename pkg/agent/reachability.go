package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultAPIServerGracePeriod is how long the apiserver may be unreachable
// before the agent reports not ready.
const DefaultAPIServerGracePeriod = time.Minute

// The back-off of the outage log: the first failed request is logged, the
// next one 30 s later at the earliest, then at doubling intervals up to 10
// minutes. An hour-long outage logs about ten lines.
const (
	unreachableLogFirst = 30 * time.Second
	unreachableLogMax   = 10 * time.Minute
)

// Reachability follows whether the agent reaches the apiserver, from the
// outcome of every request its API clients send: Wrap is their rest.Config
// WrapTransport. It answers the agent's readiness (Ready, ServeHTTP for
// /readyz) and logs an outage at the default verbosity: its first failed
// request, then with a back-off, and one line when a request gets through
// again.
//
// A request reaches the apiserver when it gets any answer but 502, 503 or
// 504 (from a proxy or load balancer in front of it, or an apiserver that
// cannot serve). A request the agent canceled itself counts for nothing.
//
// An outage runs from the first failed request after the last one that got
// through. An agent whose watches stay open sends no request for minutes,
// so readiness asks how long the requests have been failing, never how long
// ago one got through.
//
// It never acts on the kubelet: an outage changes what the agent says about
// itself, nothing else.
type Reachability struct {
	grace   time.Duration
	clock   clock.Clock
	logger  klog.Logger
	backoff *flowcontrol.Backoff

	mu sync.Mutex
	// since is the first failure of the current outage; zero: reachable.
	since time.Time
	// lastErr is the outage's last failure.
	lastErr error
	// failures counts the outage's failed requests.
	failures int
	// notReadyLogged is set once the outage outlasted the grace period
	// and said so.
	notReadyLogged bool
}

// unreachableLogKey is the back-off's one key.
const unreachableLogKey = "apiserver"

// NewReachability returns the Reachability of an apiserver that may be
// unreachable for grace before the agent reports not ready, logging to
// logger.
func NewReachability(grace time.Duration, clk clock.Clock, logger klog.Logger) *Reachability {
	return &Reachability{
		grace:  grace,
		clock:  clk,
		logger: logger,
		// client-go's Backoff on the given clock (the constructor's name
		// notwithstanding, nothing fake about it).
		backoff: flowcontrol.NewFakeBackOff(unreachableLogFirst, unreachableLogMax, clk),
	}
}

// Wrap observes the outcome of each request through rt; it is a
// rest.Config WrapTransport.
func (r *Reachability) Wrap(rt http.RoundTripper) http.RoundTripper {
	return &observedTransport{rt: rt, r: r}
}

// observedTransport is a RoundTripper that tells a Reachability the
// outcome of each request.
type observedTransport struct {
	rt http.RoundTripper
	r  *Reachability
}

func (t *observedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	switch {
	case err != nil && (errors.Is(err, context.Canceled) || errors.Is(req.Context().Err(), context.Canceled)):
		// The agent gave up on it: says nothing of the apiserver.
	case err != nil:
		t.r.observe(fmt.Errorf("%s %s: %w", req.Method, endpoint(req), err))
	case resp.StatusCode == http.StatusBadGateway, resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusGatewayTimeout:
		t.r.observe(fmt.Errorf("%s %s: %s", req.Method, endpoint(req), resp.Status))
	default:
		t.r.observe(nil)
	}
	return resp, err
}

// WrappedRoundTripper lets client-go's utilnet.RoundTripperWrapper unwrap it.
func (t *observedTransport) WrappedRoundTripper() http.RoundTripper { return t.rt }

// endpoint is the request's URL without its query, which for a watch is
// long and says nothing about reachability.
func endpoint(req *http.Request) string {
	u := *req.URL
	u.RawQuery, u.User = "", nil
	return u.String()
}

// observe records a request's outcome: nil, it reached the apiserver.
func (r *Reachability) observe(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	if err == nil {
		if !r.since.IsZero() {
			r.logger.Info("Apiserver reachable again", "after", now.Sub(r.since).Round(time.Second).String(), "failedRequests", r.failures)
			r.since, r.lastErr, r.failures, r.notReadyLogged = time.Time{}, nil, 0, false
			r.backoff.Reset(unreachableLogKey)
		}
		return
	}
	if r.since.IsZero() {
		r.since = now
	}
	r.lastErr = err
	r.failures++
	down := now.Sub(r.since)
	if down >= r.grace && !r.notReadyLogged {
		r.notReadyLogged = true
		r.logger.Error(err, "Apiserver unreachable for longer than the grace period; /readyz reports not ready, the kubelet is left as it is",
			"for", down.Round(time.Second).String(), "gracePeriod", r.grace.String(), "failedRequests", r.failures)
		r.backoff.Next(unreachableLogKey, now)
		return
	}
	if r.backoff.IsInBackOffSinceUpdate(unreachableLogKey, now) {
		return
	}
	r.backoff.Next(unreachableLogKey, now)
	r.logger.Error(err, "Cannot reach the apiserver; retrying, the kubelet is left as it is",
		"for", down.Round(time.Second).String(), "failedRequests", r.failures)
}

// Ready returns nil while the apiserver is reachable or has been
// unreachable for less than the grace period, else why not, in one line.
func (r *Reachability) Ready() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.since.IsZero() {
		return nil
	}
	down := r.clock.Since(r.since)
	if down < r.grace {
		return nil
	}
	return fmt.Errorf("apiserver unreachable for %s (since %s, grace period %s): %w",
		down.Round(time.Second), r.since.UTC().Format(time.RFC3339), r.grace, r.lastErr)
}

// ServeHTTP serves /readyz: 200 "ok" while Ready, else 503 and its reason.
func (r *Reachability) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	if err := r.Ready(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok"))
}
