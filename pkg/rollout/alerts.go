// Pause on alerts: a rollout with spec.pauseOnAlerts starts no node while
// an alert that matches fires on its Alertmanager (v1alpha1.PauseOnAlerts;
// docs/rollout.md, "Pause on alerts"). The driver asks the Alertmanager at
// most every Options.AlertInterval (alertPoller) and hands what it learnt
// to decide as a fact (Alerts); decide holds the nodes (alertsClear).

package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/alertmanager/matcher/compat"

	"github.com/kubectl-dkc/dkc/pkg/apis/dkc/v1alpha1"
)

// PauseOnAlerts names an Alertmanager and the alerts on it that hold a
// rollout.
type PauseOnAlerts = v1alpha1.PauseOnAlerts

// Reasons a running rollout starts no node for, at the start of its
// status.reason (v1alpha1).
const (
	ReasonPausedOnAlert          = v1alpha1.ReasonPausedOnAlert
	ReasonAlertsUnknown          = v1alpha1.ReasonAlertsUnknown
	ReasonAlertmanagerNotAllowed = v1alpha1.ReasonAlertmanagerNotAllowed
	ReasonBudgetHeld             = v1alpha1.ReasonBudgetHeld
)

// DefaultAlertInterval is Options.AlertInterval's default: how often the
// driver asks the Alertmanager at most.
const DefaultAlertInterval = 15 * time.Second

// alertTimeout bounds one question to the Alertmanager.
const alertTimeout = 10 * time.Second

// maxAlertBody bounds the Alertmanager's answer that the driver reads.
const maxAlertBody = 16 << 20

// maxAlertNames bounds the alert names a reason lists.
const maxAlertNames = 3

// ErrAlertmanagerNotAllowed means the driver may not ask the Alertmanager
// a rollout names: the controller asks only those it was started with.
var ErrAlertmanagerNotAllowed = errors.New("the controller asks only the Alertmanagers it was started with (--alertmanager-url)")

// ParseAlertMatcher checks s, a matcher in Alertmanager's syntax
// (name=value, name!=value, name=~regex, name!~regex), and returns it.
func ParseAlertMatcher(s string) (string, error) {
	if _, err := compat.Matcher(s, "kubectl-dkc"); err != nil {
		return "", fmt.Errorf("alert matcher %q: %w: the form is name=value, name!=value, name=~regex or name!~regex, such as severity=critical", s, err)
	}
	return s, nil
}

// PauseOnAlertForm is the form --pause-on-alert takes, for messages.
const PauseOnAlertForm = "'URL [MATCHERS]', e.g. 'http://alertmanager.monitoring:9093 severity=critical,team=~db|storage' (MATCHERS: comma-separated name=value, name!=value, name=~regex or name!~regex, as amtool takes them; none: every alert)"

// ParsePauseOnAlert parses s, in the form of --pause-on-alert
// (PauseOnAlertForm): an Alertmanager's URL, then, after a space, the
// matchers of the alerts that hold the rollout, in Alertmanager's syntax
// for a list of matchers.
func ParsePauseOnAlert(s string) (*PauseOnAlerts, error) {
	u, list, _ := strings.Cut(strings.TrimSpace(s), " ")
	p := &PauseOnAlerts{Alertmanager: u}
	if list = strings.TrimSpace(list); list != "" {
		ms, err := compat.Matchers(list, "kubectl-dkc")
		if err != nil {
			return nil, fmt.Errorf("alert matchers %q: %w: the form is %s", list, err, PauseOnAlertForm)
		}
		for _, m := range ms {
			p.Matchers = append(p.Matchers, m.String())
		}
	}
	if err := ValidatePauseOnAlerts(p, "pauseOnAlerts"); err != nil {
		return nil, fmt.Errorf("%w: the form is %s", err, PauseOnAlertForm)
	}
	return p, nil
}

// ValidatePauseOnAlerts says what is wrong with p, naming it field
// (pauseOnAlerts, spec.strategy.pauseOnAlerts); nil p is valid.
func ValidatePauseOnAlerts(p *PauseOnAlerts, field string) error {
	if p == nil {
		return nil
	}
	if err := ValidateAlertmanagerURL(p.Alertmanager); err != nil {
		return fmt.Errorf("%s.alertmanager: %w", field, err)
	}
	for i, m := range p.Matchers {
		if _, err := ParseAlertMatcher(m); err != nil {
			return fmt.Errorf("%s.matchers[%d]: %w", field, i, err)
		}
	}
	return nil
}

// ValidateAlertmanagerURL says what is wrong with s as an Alertmanager's
// base URL, if anything.
func ValidateAlertmanagerURL(s string) error {
	_, err := alertmanagerURL(s)
	return err
}

// alertmanagerURL parses s, an Alertmanager's base URL, into the form it
// is compared in: scheme and host in lower case, the path without a
// trailing slash.
func alertmanagerURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not a URL: %w", s, err)
	}
	u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%q is not an http or https URL without user, query or fragment, such as http://alertmanager.monitoring:9093", s)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// AlertmanagerAllowed reports whether base, a rollout's Alertmanager, is
// one of allowed (the controller's --alertmanager-url), compared as
// alertmanagerURL puts them.
func AlertmanagerAllowed(base string, allowed []string) bool {
	u, err := alertmanagerURL(base)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(allowed, func(a string) bool {
		v, err := alertmanagerURL(a)
		return err == nil && v.String() == u.String()
	})
}

// Alerts is what the driver last learnt from a rollout's Alertmanager, as
// decide takes it.
type Alerts struct {
	// Firing names the alerts that fire and match (their alertname
	// label), sorted, each once.
	Firing []string
	// Err says why the driver does not know: the Alertmanager did not
	// answer, or may not be asked (ErrAlertmanagerNotAllowed).
	Err error
	// Next is when the driver asks again.
	Next time.Time
}

// alertsClear reports whether no alert holds d.Rollout (spec.pauseOnAlerts)
// at now, given what the driver learnt, a. When one does, or the driver
// does not know, it records why in status.reason and wakes the driver
// when it asks again; when none does, it clears such a reason.
func alertsClear(d *Decision, a Alerts) bool {
	r := d.Rollout
	var reason string
	switch p := r.Spec.PauseOnAlerts; {
	case p == nil:
	case errors.Is(a.Err, ErrAlertmanagerNotAllowed):
		reason = fmt.Sprintf("%s: no node starts: %s, and %s is not one of them", ReasonAlertmanagerNotAllowed, ErrAlertmanagerNotAllowed, p.Alertmanager)
	case a.Err != nil:
		reason = fmt.Sprintf("%s: no node starts until Alertmanager %s answers: %v", ReasonAlertsUnknown, p.Alertmanager, a.Err)
	case len(a.Firing) > 0:
		reason = fmt.Sprintf("%s: %s firing on %s; no node starts until it clears", ReasonPausedOnAlert, alertNames(a.Firing), p.Alertmanager)
	}
	if reason == "" {
		if alertReason(r.Status.Reason) {
			r.Status.Reason = ""
			d.Write = true
		}
		return true
	}
	if r.Status.Reason != reason {
		r.Status.Reason = reason
		d.Write = true
	}
	if !a.Next.IsZero() && (d.Wake.IsZero() || a.Next.Before(d.Wake)) {
		d.Wake = a.Next
	}
	return false
}

// alertReason reports whether reason is one alertsClear wrote.
func alertReason(reason string) bool {
	for _, p := range []string{ReasonPausedOnAlert, ReasonAlertsUnknown, ReasonAlertmanagerNotAllowed} {
		if strings.HasPrefix(reason, p+":") {
			return true
		}
	}
	return false
}

// alertNames says which alerts fire: `alert "A" is`, `alerts "A", "B" are`,
// or the first maxAlertNames and how many more.
func alertNames(names []string) string {
	quoted := make([]string, 0, maxAlertNames)
	for _, n := range names[:min(len(names), maxAlertNames)] {
		quoted = append(quoted, strconv.Quote(n))
	}
	s := strings.Join(quoted, ", ")
	if more := len(names) - maxAlertNames; more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	if len(names) == 1 {
		return "alert " + s + " is"
	}
	return "alerts " + s + " are"
}

// FiringAlerts asks the Alertmanager at base (GET /api/v2/alerts) for the
// alerts that fire, are neither silenced nor inhibited, and match every
// one of matchers, and returns their names (the alertname label), sorted,
// each once. It follows no redirect.
func FiringAlerts(ctx context.Context, client *http.Client, base string, matchers []string) ([]string, error) {
	u, err := alertmanagerURL(base)
	if err != nil {
		return nil, err
	}
	u.Path += "/api/v2/alerts"
	q := url.Values{"active": {"true"}, "silenced": {"false"}, "inhibited": {"false"}}
	for _, m := range matchers {
		q.Add("filter", m)
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := noRedirects(client).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAlertBody))
	if err != nil {
		return nil, fmt.Errorf("read the answer of %s: %w", u.Redacted(), err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", u.Redacted(), resp.Status, strings.TrimSpace(string(body[:min(len(body), 512)])))
	}
	var alerts []gettableAlert
	if err := json.Unmarshal(body, &alerts); err != nil {
		return nil, fmt.Errorf("GET %s: the answer is not a list of alerts: %w", u.Redacted(), err)
	}
	var names []string
	for _, a := range alerts {
		if a.Status.State == "suppressed" {
			continue
		}
		names = append(names, a.Labels["alertname"])
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// gettableAlert is what the driver reads of an alert in the answer of
// Alertmanager's GET /api/v2/alerts (its api/v2/models.GettableAlert,
// whose package would link go-openapi's validators into dkc for two
// fields).
type gettableAlert struct {
	Labels map[string]string `json:"labels"`
	Status struct {
		// State is unprocessed, active or suppressed.
		State string `json:"state"`
	} `json:"status"`
}

// noRedirects returns a copy of client that follows no redirect: the
// driver asks the Alertmanager it was given and no other host.
func noRedirects(client *http.Client) *http.Client {
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// alertPoller asks a rollout's Alertmanager at most every interval, and
// keeps what it learnt in between.
type alertPoller struct {
	client   *http.Client
	interval time.Duration
	// restrict: ask only the Alertmanagers of allowed (the controller).
	restrict bool
	allowed  []string

	asked time.Time
	last  Alerts
}

// alerts returns what the driver knows of p's alerts at now, asking the
// Alertmanager when the last answer is interval old; the zero Alerts when
// p is nil.
func (a *alertPoller) alerts(ctx context.Context, p *PauseOnAlerts, now time.Time) Alerts {
	if p == nil {
		return Alerts{}
	}
	if !a.asked.IsZero() && now.Before(a.asked.Add(a.interval)) {
		return a.last
	}
	a.asked = now
	a.last = Alerts{Next: now.Add(a.interval)}
	if a.restrict && !AlertmanagerAllowed(p.Alertmanager, a.allowed) {
		a.last.Err = ErrAlertmanagerNotAllowed
		return a.last
	}
	ctx, cancel := context.WithTimeout(ctx, alertTimeout)
	defer cancel()
	a.last.Firing, a.last.Err = FiringAlerts(ctx, a.client, p.Alertmanager, p.Matchers)
	return a.last
}
