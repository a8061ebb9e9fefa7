package rollout

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestValidatePauseOnAlerts(t *testing.T) {
	tests := map[string]struct {
		p       *PauseOnAlerts
		wantErr string
	}{
		"none":                       {},
		"an URL alone":               {p: &PauseOnAlerts{Alertmanager: "http://alertmanager.monitoring:9093"}},
		"https with a path":          {p: &PauseOnAlerts{Alertmanager: "https://am.example.com/alertmanager/"}},
		"every operator, and quotes": {p: &PauseOnAlerts{Alertmanager: "http://127.0.0.1:9093", Matchers: []string{"severity=critical", "env!=dev", `alertname=~"Node.*"`, "team!~db|storage"}}},
		"no scheme": {p: &PauseOnAlerts{Alertmanager: "alertmanager:9093"},
			wantErr: `pauseOnAlerts.alertmanager: "alertmanager:9093" is not an http or https URL without user, query or fragment, such as http://alertmanager.monitoring:9093`},
		"a user": {p: &PauseOnAlerts{Alertmanager: "http://admin:secret@alertmanager:9093"},
			wantErr: `pauseOnAlerts.alertmanager: "http://admin:secret@alertmanager:9093" is not an http or https URL without user, query or fragment, such as http://alertmanager.monitoring:9093`},
		"a query": {p: &PauseOnAlerts{Alertmanager: "http://alertmanager:9093/?filter=x"},
			wantErr: `pauseOnAlerts.alertmanager: "http://alertmanager:9093/?filter=x" is not an http or https URL without user, query or fragment, such as http://alertmanager.monitoring:9093`},
		"a file": {p: &PauseOnAlerts{Alertmanager: "file:///etc/passwd"},
			wantErr: `pauseOnAlerts.alertmanager: "file:///etc/passwd" is not an http or https URL without user, query or fragment, such as http://alertmanager.monitoring:9093`},
		"a matcher without an operator": {p: &PauseOnAlerts{Alertmanager: "http://am:9093", Matchers: []string{"severity=critical", "critical"}},
			wantErr: `pauseOnAlerts.matchers[1]: alert matcher "critical": bad matcher format: critical: the form is name=value, name!=value, name=~regex or name!~regex, such as severity=critical`},
		"a regex that does not compile": {p: &PauseOnAlerts{Alertmanager: "http://am:9093", Matchers: []string{"alertname=~(Node"}},
			wantErr: "pauseOnAlerts.matchers[0]: alert matcher \"alertname=~(Node\": error parsing regexp: missing closing ): `^(?:(Node)$`: the form is name=value, name!=value, name=~regex or name!~regex, such as severity=critical"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.wantErr, errString(ValidatePauseOnAlerts(tc.p, "pauseOnAlerts"))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParsePauseOnAlert(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    *PauseOnAlerts
		wantErr string
	}{
		"a URL alone: every alert": {in: "http://am:9093", want: &PauseOnAlerts{Alertmanager: "http://am:9093"}},
		"matchers, each apart": {in: `http://am:9093 severity=critical,env!=dev,alertname=~"Node.*",team!~db|storage`,
			want: &PauseOnAlerts{Alertmanager: "http://am:9093", Matchers: []string{`severity="critical"`, `env!="dev"`, `alertname=~"Node.*"`, `team!~"db|storage"`}}},
		"in braces, with a comma and spaces in a quoted value": {in: ` http://am:9093  {summary="a, b c", severity="critical"} `,
			want: &PauseOnAlerts{Alertmanager: "http://am:9093", Matchers: []string{`summary="a, b c"`, `severity="critical"`}}},
		"no URL": {in: "severity=critical",
			wantErr: `pauseOnAlerts.alertmanager: "severity=critical" is not an http or https URL without user, query or fragment, such as http://alertmanager.monitoring:9093: the form is ` + PauseOnAlertForm},
		"a matcher without an operator": {in: "http://am:9093 critical",
			wantErr: `alert matchers "critical": bad matcher format: critical: the form is ` + PauseOnAlertForm},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParsePauseOnAlert(tc.in)
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	// What it parsed is valid, and parses the same again.
	p, _ := ParsePauseOnAlert(`http://am:9093 team=~"db|storage"`)
	again, err := ParsePauseOnAlert(p.Alertmanager + " " + strings.Join(p.Matchers, ","))
	if err != nil || !cmp.Equal(p, again) {
		t.Errorf("parsed again: %+v, %v; want %+v", again, err, p)
	}
}

func TestAlertmanagerAllowed(t *testing.T) {
	allowed := []string{"http://alertmanager.monitoring:9093", "https://am.example.com/prefix/"}
	tests := map[string]bool{
		"http://alertmanager.monitoring:9093":       true,
		"http://alertmanager.monitoring:9093/":      true,
		"HTTP://Alertmanager.Monitoring:9093":       true,
		"https://am.example.com/prefix":             true,
		"https://alertmanager.monitoring:9093":      false,
		"http://alertmanager.monitoring:9094":       false,
		"http://169.254.169.254/latest":             false,
		"https://am.example.com/prefix/../evil":     false,
		"https://am.example.com":                    false,
		"http://admin@alertmanager.monitoring:9093": false,
	}
	for u, want := range tests {
		if got := AlertmanagerAllowed(u, allowed); got != want {
			t.Errorf("AlertmanagerAllowed(%q): %t, want %t", u, got, want)
		}
	}
	if AlertmanagerAllowed("http://alertmanager.monitoring:9093", nil) {
		t.Error("no Alertmanager allowed: allowed one")
	}
}

func TestDecidePausedOnAlert(t *testing.T) {
	am := &PauseOnAlerts{Alertmanager: "http://am:9093", Matchers: []string{"severity=critical"}}
	next := t0.Add(15 * time.Second)
	spec := Spec{MaxUnavailable: intstr.FromInt32(2), PauseOnAlerts: am}
	firing := `PausedOnAlert: alert "NodeDown" is firing on http://am:9093; no node starts until it clears`
	unknown := `AlertsUnknown: no node starts until Alertmanager http://am:9093 answers: connection refused`
	tests := map[string]struct {
		in   decideInput
		want Decision
	}{
		"while a matching alert fires no node starts, the reason names it, and the driver wakes to ask again": {
			in:   decideInput{spec: spec, alerts: Alerts{Firing: []string{"NodeDown"}, Next: next}},
			want: Decision{Rollout: &Rollout{Status: Status{State: Running, Reason: firing}}, Write: true, Wake: next},
		},
		"the reason is written once": {
			in:   decideInput{spec: spec, status: Status{Reason: firing}, alerts: Alerts{Firing: []string{"NodeDown"}, Next: next}},
			want: Decision{Rollout: &Rollout{Status: Status{State: Running, Reason: firing}}, Wake: next},
		},
		"several alerts: the first three are named, and how many more": {
			in: decideInput{spec: spec, alerts: Alerts{Firing: []string{"A", "B", "C", "D", "E"}, Next: next}},
			want: Decision{Rollout: &Rollout{Status: Status{State: Running,
				Reason: `PausedOnAlert: alerts "A", "B", "C" and 2 more are firing on http://am:9093; no node starts until it clears`}}, Write: true, Wake: next},
		},
		"a node already started finishes, and a node marked but not assigned is assigned": {
			in: decideInput{spec: spec, status: Status{Reason: firing},
				observed: map[string]Observed{"n1": ours(applying), "n2": ours(idle)},
				alerts:   Alerts{Firing: []string{"NodeDown"}, Next: next}},
			want: Decision{Rollout: &Rollout{Status: Status{State: Running, Reason: firing}}, Assign: []string{"n2"}, Wake: next},
		},
		"an Alertmanager that does not answer holds the rollout: fail closed": {
			in:   decideInput{spec: spec, alerts: Alerts{Err: errors.New("connection refused"), Next: next}},
			want: Decision{Rollout: &Rollout{Status: Status{State: Running, Reason: unknown}}, Write: true, Wake: next},
		},
		"an Alertmanager the driver may not ask holds the rollout, and says so": {
			in: decideInput{spec: spec, alerts: Alerts{Err: ErrAlertmanagerNotAllowed, Next: next}},
			want: Decision{Rollout: &Rollout{Status: Status{State: Running,
				Reason: "AlertmanagerNotAllowed: no node starts: the controller asks only the Alertmanagers it was started with (--alertmanager-url), and http://am:9093 is not one of them"}}, Write: true, Wake: next},
		},
		"once the alert clears, nodes start and the reason is cleared": {
			in:   decideInput{spec: spec, status: Status{Reason: firing}, alerts: Alerts{Next: next}},
			want: Decision{Rollout: runningAt(0, nil), Write: true, Start: []string{"n1", "n2"}, Assign: []string{"n1", "n2"}},
		},
		"outside every window the window's reason wins, and the alert is not looked at": {
			in: decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(2), PauseOnAlerts: am,
				Windows: Windows{{Days: []string{"Mon"}, Start: "06:00", Duration: metav1.Duration{Duration: time.Hour}}}},
				status: Status{Reason: firing}, alerts: Alerts{Firing: []string{"NodeDown"}, Next: next}},
			want: Decision{Rollout: &Rollout{Status: Status{State: Running, Reason: "OutsideWindow: no node starts before the next maintenance window, at 2026-11-23T06:00:00Z"}},
				Write: true, Wake: time.Date(2026, 11, 23, 6, 0, 0, 0, time.UTC)},
		},
		"a rollout that does not pause on alerts ignores them": {
			in:   decideInput{spec: Spec{MaxUnavailable: intstr.FromInt32(2)}, alerts: Alerts{Firing: []string{"NodeDown"}}},
			want: Decision{Rollout: runningAt(0, nil), Start: []string{"n1", "n2"}, Assign: []string{"n1", "n2"}},
		},
		"a rollout whose nodes are all done is done while an alert fires": {
			in: decideInput{spec: Spec{Nodes: fleetOf(1), MaxUnavailable: intstr.FromInt32(1), PauseOnAlerts: am},
				status: Status{Reason: firing}, observed: map[string]Observed{"n1": ours(running)},
				alerts: Alerts{Firing: []string{"NodeDown"}, Next: next}},
			want: Decision{Rollout: &Rollout{Status: Status{State: Done}}, Final: true},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := tc.in.decide(t)
			if diff := cmp.Diff(tc.want, d, statusOf); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// fakeAlertmanager answers GET /api/v2/alerts with the alerts it holds, as
// Alertmanager does for active=true&silenced=false&inhibited=false with no
// filter, and records each query.
type fakeAlertmanager struct {
	mu      sync.Mutex
	firing  []string
	queries []url.Values
	status  int
}

func (f *fakeAlertmanager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.URL.Path != "/api/v2/alerts" || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	f.queries = append(f.queries, r.URL.Query())
	if f.status != 0 {
		http.Error(w, "failed to parse matchers", f.status)
		return
	}
	var alerts []string
	for _, name := range f.firing {
		alerts = append(alerts, fmt.Sprintf(`{"labels":{"alertname":%q,"severity":"critical"},"annotations":{},"fingerprint":"f","receivers":[{"name":"null"}],"startsAt":"2026-11-23T05:00:00Z","endsAt":"2026-11-23T06:00:00Z","updatedAt":"2026-11-23T05:00:00Z","status":{"state":"active","silencedBy":[],"inhibitedBy":[],"mutedBy":[]}}`, name))
	}
	// A suppressed alert is not counted, should the server send one.
	alerts = append(alerts, `{"labels":{"alertname":"Silenced"},"status":{"state":"suppressed","silencedBy":["s"],"inhibitedBy":[],"mutedBy":[]}}`)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, "["+strings.Join(alerts, ",")+"]")
}

func (f *fakeAlertmanager) set(firing ...string) {
	f.mu.Lock()
	f.firing = firing
	f.mu.Unlock()
}

func (f *fakeAlertmanager) asked() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queries)
}

func TestFiringAlerts(t *testing.T) {
	am := &fakeAlertmanager{firing: []string{"NodeDown", "DiskFull", "NodeDown"}}
	srv := httptest.NewServer(am)
	defer srv.Close()
	ctx := context.Background()

	got, err := FiringAlerts(ctx, srv.Client(), srv.URL+"/", []string{"severity=critical", `team=~"db|storage"`})
	if err != nil {
		t.Fatalf("FiringAlerts: %v", err)
	}
	if diff := cmp.Diff([]string{"DiskFull", "NodeDown"}, got); diff != "" {
		t.Errorf("firing (-want +got):\n%s", diff)
	}
	want := url.Values{"active": {"true"}, "silenced": {"false"}, "inhibited": {"false"}, "filter": {"severity=critical", `team=~"db|storage"`}}
	if diff := cmp.Diff(want, am.queries[0]); diff != "" {
		t.Errorf("query (-want +got):\n%s", diff)
	}

	am.status = http.StatusBadRequest
	_, err = FiringAlerts(ctx, srv.Client(), srv.URL, nil)
	if want := "GET " + srv.URL + "/api/v2/alerts?active=true&inhibited=false&silenced=false: 400 Bad Request: failed to parse matchers"; errString(err) != want {
		t.Errorf("error %q, want %q", errString(err), want)
	}

	// A redirect is not followed: the driver asks no host but the one
	// it was given.
	elsewhere := httptest.NewServer(am)
	defer elsewhere.Close()
	redirect := httptest.NewServer(http.RedirectHandler(elsewhere.URL+"/api/v2/alerts", http.StatusFound))
	defer redirect.Close()
	am.status = 0
	before := am.asked()
	if _, err := FiringAlerts(ctx, redirect.Client(), redirect.URL, nil); err == nil || !strings.Contains(err.Error(), "302 Found") {
		t.Errorf("FiringAlerts through a redirect: %v, want the 302 as an error", err)
	}
	if am.asked() != before {
		t.Error("the redirect was followed")
	}
}

func TestAlertPoller(t *testing.T) {
	am := &fakeAlertmanager{firing: []string{"NodeDown"}}
	srv := httptest.NewServer(am)
	defer srv.Close()
	ctx := context.Background()
	p := &PauseOnAlerts{Alertmanager: srv.URL}
	poller := &alertPoller{client: srv.Client(), interval: 15 * time.Second}

	if got := poller.alerts(ctx, nil, t0); got.Err != nil || got.Firing != nil || am.asked() != 0 {
		t.Fatalf("no pauseOnAlerts: %+v, %d questions; want nothing asked", got, am.asked())
	}
	want := Alerts{Firing: []string{"NodeDown"}, Next: t0.Add(15 * time.Second)}
	if diff := cmp.Diff(want, poller.alerts(ctx, p, t0)); diff != "" {
		t.Errorf("first (-want +got):\n%s", diff)
	}
	am.set()
	if diff := cmp.Diff(want, poller.alerts(ctx, p, t0.Add(14*time.Second))); diff != "" || am.asked() != 1 {
		t.Errorf("within the interval, asked %d times, want 1, and the last answer (-want +got):\n%s", am.asked(), diff)
	}
	if got := poller.alerts(ctx, p, t0.Add(15*time.Second)); got.Firing != nil || am.asked() != 2 {
		t.Errorf("after the interval: %+v, asked %d times; want no alert, asked twice", got, am.asked())
	}

	srv.Close()
	if got := poller.alerts(ctx, p, t0.Add(30*time.Second)); got.Err == nil {
		t.Error("an Alertmanager that is gone: no error, want one (fail closed)")
	}

	restricted := &alertPoller{client: http.DefaultClient, interval: time.Second, restrict: true, allowed: []string{"http://alertmanager.monitoring:9093"}}
	if got := restricted.alerts(ctx, p, t0); !errors.Is(got.Err, ErrAlertmanagerNotAllowed) {
		t.Errorf("an Alertmanager not allowed: %v, want ErrAlertmanagerNotAllowed", got.Err)
	}
}

// TestRunPausesOnAlert drives a rollout on a fake clock against an
// Alertmanager: while an alert fires no node is assigned and the rollout
// names it; the driver asks again every AlertInterval, and the rollout
// completes once the alert clears.
func TestRunPausesOnAlert(t *testing.T) {
	am := &fakeAlertmanager{firing: []string{"NodeDown"}}
	srv := httptest.NewServer(am)
	defer srv.Close()
	client, names := newFleet(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	agents := newAgents(client, 10*time.Millisecond)
	agents.run(ctx, t)
	store := startRollout(t, client, Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(2),
		PauseOnAlerts: &PauseOnAlerts{Alertmanager: srv.URL, Matchers: []string{"severity=critical"}}})
	h := runHeld(ctx, t, client, store, Options{AlertInterval: 15 * time.Second, HTTPClient: srv.Client()},
		`PausedOnAlert: alert "NodeDown" is firing on `+srv.URL+`; no node starts until it clears`)
	asked := am.asked()
	am.set()
	h.clock.Step(14 * time.Second)
	noneAssigned(ctx, t, client, names, "before the driver asked again")
	h.clock.Step(time.Second)
	h.finished(t)
	if am.asked() <= asked {
		t.Error("the driver finished without asking the Alertmanager again")
	}
	agents.checkBudgetAndOnce(t, names, 2)
}
