package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
)

const (
	cannotReach  = "ERROR Cannot reach the apiserver; retrying, the kubelet is left as it is"
	notReady     = "ERROR Apiserver unreachable for longer than the grace period; /readyz reports not ready, the kubelet is left as it is"
	reachedAgain = "INFO Apiserver reachable again"
)

var (
	refused = errors.New("GET https://10.0.0.1:6443/api/v1/nodes: dial tcp 10.0.0.1:6443: connect: connection refused")
	timeout = errors.New("GET https://10.0.0.1:6443/api/v1/pods: dial tcp 10.0.0.1:6443: i/o timeout")
)

// request is a request's outcome at an offset from t0; err nil: it
// reached the apiserver.
type request struct {
	at  time.Duration
	err error
}

// failingEvery is a request failing with refused every step, from from
// until before to.
func failingEvery(step, from, to time.Duration) []request {
	var out []request
	for at := from; at < to; at += step {
		out = append(out, request{at: at, err: refused})
	}
	return out
}

// newTestReachability is a Reachability with a grace period of a minute on
// a FakeClock at t0, logging to a buffer that logLines reads.
func newTestReachability(t *testing.T) (*Reachability, *testingclock.FakeClock, klog.Logger) {
	clk := testingclock.NewFakeClock(t0)
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	return NewReachability(time.Minute, clk, logger), clk, logger
}

// logLines is what logger logged, one "TYPE message for=/after=" a line;
// each line must be at the default verbosity.
func logLines(t *testing.T, logger klog.Logger) []string {
	t.Helper()
	var lines []string
	for _, e := range logger.GetSink().(ktesting.Underlier).GetBuffer().Data() {
		if e.Verbosity != 0 {
			t.Errorf("%q logged at -v=%d, want the default verbosity", e.Message, e.Verbosity)
		}
		line := strings.ToUpper(string(e.Type)) + " " + e.Message
		kv := e.ParameterKVList
		for i := 0; i+1 < len(kv); i += 2 {
			if k := kv[i]; k == "for" || k == "after" {
				line += fmt.Sprintf(" %s=%v", k, kv[i+1])
			}
		}
		lines = append(lines, line)
	}
	return lines
}

func readyString(r *Reachability) string {
	if err := r.Ready(); err != nil {
		return err.Error()
	}
	return "ready"
}

func TestReachability(t *testing.T) {
	tests := map[string]struct {
		outcomes []request
		// now is when Ready is asked, after the last outcome.
		now       time.Duration
		wantReady string
		wantLog   []string
	}{
		"an apiserver that answers: ready, nothing logged": {
			outcomes:  []request{{at: 0}, {at: 10 * time.Second}, {at: 5 * time.Minute}},
			now:       time.Hour,
			wantReady: "ready",
		},
		"ready before any request": {
			now:       time.Hour,
			wantReady: "ready",
		},
		"the first failure is logged at once, and the agent stays ready within the grace period": {
			outcomes:  []request{{at: 0, err: refused}},
			now:       59 * time.Second,
			wantReady: "ready",
			wantLog:   []string{cannotReach + " for=0s"},
		},
		"failures within the back-off are not logged": {
			outcomes:  failingEvery(5*time.Second, 0, 30*time.Second),
			now:       30 * time.Second,
			wantReady: "ready",
			wantLog:   []string{cannotReach + " for=0s"},
		},
		"not ready once the grace period is over, naming the last error and since when": {
			outcomes: []request{{at: 0, err: refused}, {at: 50 * time.Second, err: timeout}},
			now:      time.Minute,
			wantReady: "apiserver unreachable for 1m0s (since 2026-01-02T03:04:05Z, grace period 1m0s): " +
				"GET https://10.0.0.1:6443/api/v1/pods: dial tcp 10.0.0.1:6443: i/o timeout",
			wantLog: []string{cannotReach + " for=0s", cannotReach + " for=50s"},
		},
		"not ready with no request since the grace period began: time alone tells": {
			outcomes: []request{{at: 0, err: refused}},
			now:      10 * time.Minute,
			wantReady: "apiserver unreachable for 10m0s (since 2026-01-02T03:04:05Z, grace period 1m0s): " +
				"GET https://10.0.0.1:6443/api/v1/nodes: dial tcp 10.0.0.1:6443: connect: connection refused",
			wantLog: []string{cannotReach + " for=0s"},
		},
		"an hour-long outage logs ten lines, at doubling intervals up to 10 minutes": {
			outcomes: failingEvery(10*time.Second, 0, time.Hour),
			now:      time.Hour,
			wantReady: "apiserver unreachable for 1h0m0s (since 2026-01-02T03:04:05Z, grace period 1m0s): " +
				"GET https://10.0.0.1:6443/api/v1/nodes: dial tcp 10.0.0.1:6443: connect: connection refused",
			wantLog: []string{
				cannotReach + " for=0s",
				cannotReach + " for=30s",
				notReady + " for=1m0s",
				cannotReach + " for=3m0s",
				cannotReach + " for=7m0s",
				cannotReach + " for=15m0s",
				cannotReach + " for=25m0s",
				cannotReach + " for=35m0s",
				cannotReach + " for=45m0s",
				cannotReach + " for=55m0s",
			},
		},
		"a request that gets through ends the outage: ready, and one line says how long it lasted": {
			outcomes:  []request{{at: 0, err: refused}, {at: 3*time.Minute + 12*time.Second, err: refused}, {at: 3*time.Minute + 12*time.Second}},
			now:       3*time.Minute + 12*time.Second,
			wantReady: "ready",
			wantLog:   []string{cannotReach + " for=0s", notReady + " for=3m12s", reachedAgain + " after=3m12s"},
		},
		"a new outage starts its grace period and its log back-off afresh": {
			outcomes: []request{
				{at: 0, err: refused}, {at: 90 * time.Second, err: refused}, {at: 2 * time.Minute},
				{at: 2*time.Minute + 10*time.Second, err: refused}, {at: 2*time.Minute + 40*time.Second, err: refused},
			},
			now:       3*time.Minute + 9*time.Second,
			wantReady: "ready",
			wantLog: []string{
				cannotReach + " for=0s", notReady + " for=1m30s", reachedAgain + " after=2m0s",
				cannotReach + " for=0s", cannotReach + " for=30s",
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r, clk, logger := newTestReachability(t)
			for _, o := range tc.outcomes {
				clk.SetTime(t0.Add(o.at))
				r.observe(o.err)
			}
			clk.SetTime(t0.Add(tc.now))

			diff(t, "readiness", tc.wantReady, readyString(r))
			diff(t, "log", tc.wantLog, logLines(t, logger))
		})
	}
}

// The transport counts an answer as reaching the apiserver, except a
// gateway's or an overloaded server's 502, 503 and 504; it counts a request
// that got no answer as a failure, unless the agent canceled it.
func TestReachabilityTransport(t *testing.T) {
	tests := map[string]struct {
		status int
		// down makes the server refuse connections.
		down bool
		// cancel cancels the request before it is sent.
		cancel    bool
		wantError string
	}{
		"200 reaches it":                            {status: http.StatusOK},
		"403 reaches it: the apiserver answered":    {status: http.StatusForbidden},
		"404 reaches it":                            {status: http.StatusNotFound},
		"429 reaches it: it throttles":              {status: http.StatusTooManyRequests},
		"500 reaches it":                            {status: http.StatusInternalServerError},
		"502 from a proxy fails":                    {status: http.StatusBadGateway, wantError: "GET URL/api/v1/nodes: 502 Bad Gateway"},
		"503 fails":                                 {status: http.StatusServiceUnavailable, wantError: "GET URL/api/v1/nodes: 503 Service Unavailable"},
		"504 fails":                                 {status: http.StatusGatewayTimeout, wantError: "GET URL/api/v1/nodes: 504 Gateway Timeout"},
		"a refused connection fails":                {down: true, wantError: "GET URL/api/v1/nodes: dial tcp HOST: connect: connection refused"},
		"a request the agent canceled says nothing": {down: true, cancel: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
			}))
			url, host := srv.URL, srv.Listener.Addr().String()
			if tc.down {
				srv.Close()
			} else {
				defer srv.Close()
			}
			r, clk, _ := newTestReachability(t)
			client := &http.Client{Transport: r.Wrap(&http.Transport{})}
			ctx, cancel := context.WithCancel(context.Background())
			if tc.cancel {
				cancel()
			}
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api/v1/nodes?watch=true&resourceVersion=7", nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp, err := client.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}

			clk.Step(time.Hour)
			want := "ready"
			if tc.wantError != "" {
				want = "apiserver unreachable for 1h0m0s (since 2026-01-02T03:04:05Z, grace period 1m0s): " +
					strings.NewReplacer("URL", url, "HOST", host).Replace(tc.wantError)
			}
			diff(t, "readiness an hour later", want, readyString(r))
		})
	}
}

// /readyz answers 200 ok while ready, and 503 with the reason in one line
// once the outage outlasted the grace period.
func TestReadyz(t *testing.T) {
	r, clk, _ := newTestReachability(t)
	get := func() string {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return fmt.Sprintf("%d %s", rec.Code, rec.Body.String())
	}

	diff(t, "before any request", "200 ok", get())
	r.observe(refused)
	clk.Step(59 * time.Second)
	diff(t, "within the grace period", "200 ok", get())
	clk.Step(time.Second)
	diff(t, "after the grace period", "503 apiserver unreachable for 1m0s (since 2026-01-02T03:04:05Z, grace period 1m0s): "+
		"GET https://10.0.0.1:6443/api/v1/nodes: dial tcp 10.0.0.1:6443: connect: connection refused\n", get())
	r.observe(nil)
	diff(t, "once a request got through", "200 ok", get())
}
