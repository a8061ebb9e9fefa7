// Maintenance windows: the times at which a rollout may start nodes. A
// window is days of the week, a start time on each, a duration and a time
// zone; outside every window of a rollout no node starts, and the nodes
// already started finish (docs/rollout.md, "Maintenance windows"). Time
// zones load from the system's zoneinfo; pkg/rollout links time/tzdata, so
// that they load in images without /usr/share/zoneinfo, and the slim agent,
// which links this package but evaluates no window, stays without it.

package v1alpha1

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReasonOutsideWindow starts a running rollout's status.reason while it is
// outside every window of spec.windows, followed by the next window's
// start (RFC 3339); a pool's Reconciling condition takes it as its reason.
const ReasonOutsideWindow = "OutsideWindow"

// WindowForm is the form --window takes, for messages.
const WindowForm = "'DAYS HH:MM DURATION [TIME-ZONE]', e.g. 'Mon-Fri 22:00 4h Europe/Berlin' (DAYS: Mon..Sun, comma-separated days or ranges such as Sat,Sun or Fri-Mon; TIME-ZONE: an IANA name, UTC when absent)"

// MaxWindowDuration is the longest window: a week.
const MaxWindowDuration = 7 * 24 * time.Hour

// dayNames are the days as a window names them, in time.Weekday's order.
var dayNames = []string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}

// Window is a maintenance window: from Start on each of Days, in TimeZone,
// for Duration. A window that starts on Fri at 22:00 for 4h is open until
// Sat 02:00. Duration is elapsed time: across a change to or from daylight
// saving time a 4h window lasts 4 hours, not until the same wall clock.
type Window struct {
	// Days are the days the window starts on: Mon, Tue, Wed, Thu, Fri,
	// Sat, Sun.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=7
	// +kubebuilder:validation:items:Enum=Mon;Tue;Wed;Thu;Fri;Sat;Sun
	Days []string `json:"days"`
	// Start is the time it starts, HH:MM on a 24-hour clock, in TimeZone.
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9]$`
	Start string `json:"start"`
	// Duration is how long it stays open (a Go duration, 4h), from 1m to
	// 168h.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('168h')",message="must be a duration from 1m to 168h, such as 4h"
	Duration metav1.Duration `json:"duration"`
	// TimeZone is the IANA time zone of Days and Start, such as
	// Europe/Berlin; UTC when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	TimeZone string `json:"timeZone,omitempty"`
}

// Windows are a rollout's windows. None means always open.
//
// +kubebuilder:validation:MaxItems=16
type Windows []Window

// ParseWindow parses a window in the form of --window (WindowForm).
func ParseWindow(s string) (Window, error) {
	fields := strings.Fields(s)
	if len(fields) < 3 || len(fields) > 4 {
		return Window{}, fmt.Errorf("window %q: want 3 or 4 fields, got %d: the form is %s", s, len(fields), WindowForm)
	}
	days, err := parseDays(fields[0])
	if err != nil {
		return Window{}, fmt.Errorf("window %q: %w: the form is %s", s, err, WindowForm)
	}
	d, err := time.ParseDuration(fields[2])
	if err != nil {
		return Window{}, fmt.Errorf("window %q: duration %q is not a Go duration such as 4h or 90m: the form is %s", s, fields[2], WindowForm)
	}
	w := Window{Days: days, Start: fields[1], Duration: metav1.Duration{Duration: d}}
	if len(fields) == 4 {
		w.TimeZone = fields[3]
	}
	if err := w.Validate(); err != nil {
		return Window{}, fmt.Errorf("window %q: %w: the form is %s", s, err, WindowForm)
	}
	return w, nil
}

// parseDays parses comma-separated days and ranges of days (Fri-Mon wraps
// over the week's end) into the days, in the week's order from Mon.
func parseDays(s string) ([]string, error) {
	set := map[time.Weekday]bool{}
	for _, part := range strings.Split(s, ",") {
		from, to, isRange := strings.Cut(part, "-")
		a, err := parseDay(from)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = parseDay(to); err != nil {
				return nil, err
			}
		}
		for d := a; ; d = (d + 1) % 7 {
			set[d] = true
			if d == b {
				break
			}
		}
	}
	var days []string
	for i := range 7 {
		if d := time.Weekday((i + 1) % 7); set[d] {
			days = append(days, dayNames[d])
		}
	}
	return days, nil
}

func parseDay(s string) (time.Weekday, error) {
	for i, name := range dayNames {
		if strings.EqualFold(s, name) {
			return time.Weekday(i), nil
		}
	}
	return 0, fmt.Errorf("day %q is not one of Mon, Tue, Wed, Thu, Fri, Sat, Sun", s)
}

// Validate says what is wrong with w, if anything.
func (w Window) Validate() error {
	_, err := w.compile()
	return err
}

// String gives w in the form of --window.
func (w Window) String() string {
	s := strings.Join(w.Days, ",") + " " + w.Start + " " + w.Duration.Duration.String()
	if w.TimeZone != "" {
		s += " " + w.TimeZone
	}
	return s
}

// String gives ws in the form of --window, separated by "; ".
func (ws Windows) String() string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = w.String()
	}
	return strings.Join(parts, "; ")
}

// compiled is a window ready to test times against.
type compiled struct {
	days     [7]bool
	hour     int
	minute   int
	duration time.Duration
	loc      *time.Location
}

func (w Window) compile() (compiled, error) {
	var c compiled
	if len(w.Days) == 0 {
		return c, errors.New("no days: name at least one of Mon, Tue, Wed, Thu, Fri, Sat, Sun")
	}
	for _, name := range w.Days {
		d, err := parseDay(name)
		if err != nil {
			return c, err
		}
		c.days[d] = true
	}
	hh, mm, ok := strings.Cut(w.Start, ":")
	h, herr := strconv.Atoi(hh)
	m, merr := strconv.Atoi(mm)
	if !ok || len(hh) != 2 || len(mm) != 2 || herr != nil || merr != nil || h < 0 || h > 23 || m < 0 || m > 59 {
		return c, fmt.Errorf("start %q is not a time HH:MM from 00:00 to 23:59", w.Start)
	}
	c.hour, c.minute = h, m
	c.duration = w.Duration.Duration
	if c.duration < time.Minute || c.duration > MaxWindowDuration {
		return c, fmt.Errorf("duration %s is not from 1m to %s", c.duration, MaxWindowDuration)
	}
	loc, err := time.LoadLocation(w.TimeZone)
	if w.TimeZone == "Local" || err != nil {
		return c, fmt.Errorf("time zone %q is not an IANA time zone such as UTC or Europe/Berlin", w.TimeZone)
	}
	c.loc = loc
	return c, nil
}

// starts returns the window's starts on the days from `from` days before
// t's date (in the window's zone) to `to` days after, in order.
func (c compiled) starts(t time.Time, from, to int) []time.Time {
	local := t.In(c.loc)
	var out []time.Time
	for i := -from; i <= to; i++ {
		// Noon is on the right date whatever daylight saving does.
		day := time.Date(local.Year(), local.Month(), local.Day()+i, 12, 0, 0, 0, c.loc)
		if !c.days[day.Weekday()] {
			continue
		}
		out = append(out, time.Date(day.Year(), day.Month(), day.Day(), c.hour, c.minute, 0, 0, c.loc))
	}
	return out
}

// open reports whether the window is open at t: a start at or before t
// that the duration has not run out since.
func (c compiled) open(t time.Time) bool {
	return slices.ContainsFunc(c.starts(t, 8, 0), func(s time.Time) bool {
		return !s.After(t) && t.Before(s.Add(c.duration))
	})
}

// next returns the first start after t.
func (c compiled) next(t time.Time) time.Time {
	for _, s := range c.starts(t, 0, 8) {
		if s.After(t) {
			return s
		}
	}
	return time.Time{} // not reached: a window starts on some day of every week
}

// Open reports whether ws allow a node to start at t: they are none, or one
// of them is open. An invalid window is never open.
func (ws Windows) Open(t time.Time) bool {
	if len(ws) == 0 {
		return true
	}
	for _, w := range ws {
		if c, err := w.compile(); err == nil && c.open(t) {
			return true
		}
	}
	return false
}

// Next returns the first start of a window of ws after t, in that window's
// time zone; zero when ws has no valid window.
func (ws Windows) Next(t time.Time) time.Time {
	var first time.Time
	for _, w := range ws {
		c, err := w.compile()
		if err != nil {
			continue
		}
		if n := c.next(t); first.IsZero() || n.Before(first) {
			first = n
		}
	}
	return first
}

// Validate says what is wrong with the first invalid window of ws, naming
// it by its index under field (spec.windows, spec.strategy.windows).
func (ws Windows) Validate(field string) error {
	for i, w := range ws {
		if err := w.Validate(); err != nil {
			return fmt.Errorf("%s[%d]: %w", field, i, err)
		}
	}
	return nil
}

// OutsideWindowReason is a rollout's status.reason while it waits, at now,
// for the next window of ws.
func OutsideWindowReason(ws Windows, now time.Time) string {
	return fmt.Sprintf("%s: no node starts before the next maintenance window, at %s", ReasonOutsideWindow, ws.Next(now).Format(time.RFC3339))
}
