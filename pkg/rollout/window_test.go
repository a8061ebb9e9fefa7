package rollout

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	testingclock "k8s.io/utils/clock/testing"
)

func mustWindow(t *testing.T, s string) Window {
	t.Helper()
	w, err := ParseWindow(s)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestParseWindow(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    Window
		wantErr string
	}{
		"a range of days, in a time zone": {
			in:   "Mon-Fri 22:00 4h Europe/Berlin",
			want: Window{Days: []string{"Mon", "Tue", "Wed", "Thu", "Fri"}, Start: "22:00", Duration: metav1.Duration{Duration: 4 * time.Hour}, TimeZone: "Europe/Berlin"},
		},
		"a range over the week's end, days in any case, UTC by default": {
			in:   "fri-MON 01:30 90m",
			want: Window{Days: []string{"Mon", "Fri", "Sat", "Sun"}, Start: "01:30", Duration: metav1.Duration{Duration: 90 * time.Minute}},
		},
		"days and ranges, each once": {
			in:   "Sat,Sun,Sun-Mon 00:00 168h UTC",
			want: Window{Days: []string{"Mon", "Sat", "Sun"}, Start: "00:00", Duration: metav1.Duration{Duration: MaxWindowDuration}, TimeZone: "UTC"},
		},
		"too few fields": {
			in:      "Mon-Fri 22:00",
			wantErr: `window "Mon-Fri 22:00": want 3 or 4 fields, got 2: the form is ` + WindowForm,
		},
		"a day that is not one": {
			in:      "Mon-Fry 22:00 4h",
			wantErr: `window "Mon-Fry 22:00 4h": day "Fry" is not one of Mon, Tue, Wed, Thu, Fri, Sat, Sun: the form is ` + WindowForm,
		},
		"a start past the day's end": {
			in:      "Mon 24:00 4h",
			wantErr: `window "Mon 24:00 4h": start "24:00" is not a time HH:MM from 00:00 to 23:59: the form is ` + WindowForm,
		},
		"a start without its leading zero": {
			in:      "Mon 9:00 4h",
			wantErr: `window "Mon 9:00 4h": start "9:00" is not a time HH:MM from 00:00 to 23:59: the form is ` + WindowForm,
		},
		"a duration without a unit": {
			in:      "Mon 09:00 4",
			wantErr: `window "Mon 09:00 4": duration "4" is not a Go duration such as 4h or 90m: the form is ` + WindowForm,
		},
		"a duration over a week": {
			in:      "Mon 09:00 169h",
			wantErr: `window "Mon 09:00 169h": duration 169h0m0s is not from 1m to 168h0m0s: the form is ` + WindowForm,
		},
		"a time zone that does not exist": {
			in:      "Mon 09:00 1h Mars/Olympus",
			wantErr: `window "Mon 09:00 1h Mars/Olympus": time zone "Mars/Olympus" is not an IANA time zone such as UTC or Europe/Berlin: the form is ` + WindowForm,
		},
		"the machine's zone, which differs between the machines that drive a rollout": {
			in:      "Mon 09:00 1h Local",
			wantErr: `window "Mon 09:00 1h Local": time zone "Local" is not an IANA time zone such as UTC or Europe/Berlin: the form is ` + WindowForm,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseWindow(tc.in)
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if err == nil {
				if again, err := ParseWindow(got.String()); err != nil || !cmp.Equal(again, got) {
					t.Errorf("String %q parses to %+v, %v", got.String(), again, err)
				}
			}
		})
	}
}

func TestWindowsOpenAndNext(t *testing.T) {
	// 2026-11-23 is a Monday. Berlin left summer time on 2026-10-25 at
	// 03:00 CEST (01:00 UTC), and enters it on 2027-03-28 at 02:00 CET.
	utc := func(s string) time.Time {
		t.Helper()
		ts, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	tests := map[string]struct {
		windows  []string
		now      string
		wantOpen bool
		wantNext string // RFC 3339, in the window's zone
	}{
		"inside a window": {
			windows: []string{"Mon-Fri 22:00 4h"}, now: "2026-11-24T23:00:00Z",
			wantOpen: true, wantNext: "2026-11-25T22:00:00Z",
		},
		"open at its start": {
			windows: []string{"Mon 22:00 4h"}, now: "2026-11-23T22:00:00Z",
			wantOpen: true, wantNext: "2026-11-30T22:00:00Z",
		},
		"closed at its end": {
			windows: []string{"Mon 22:00 4h"}, now: "2026-11-24T02:00:00Z",
			wantNext: "2026-11-30T22:00:00Z",
		},
		"across midnight: a window from Friday 22:00 for 4h is open on Saturday at 01:00": {
			windows: []string{"Fri 22:00 4h"}, now: "2026-11-28T01:00:00Z",
			wantOpen: true, wantNext: "2026-12-04T22:00:00Z",
		},
		"across the week's end: a window from Sunday 23:00 is open on Monday at 00:30": {
			windows: []string{"Sun 23:00 2h"}, now: "2026-11-23T00:30:00Z",
			wantOpen: true, wantNext: "2026-11-29T23:00:00Z",
		},
		"the next start wraps over the week's end": {
			windows: []string{"Mon 05:00 10m"}, now: "2026-11-23T05:20:00Z",
			wantNext: "2026-11-30T05:00:00Z",
		},
		"a window lasting the whole week is always open": {
			windows: []string{"Mon 00:00 168h"}, now: "2026-11-29T23:59:00Z",
			wantOpen: true, wantNext: "2026-11-30T00:00:00Z",
		},
		"in a time zone, on the local day: Monday 00:30 in Berlin is Sunday in UTC": {
			windows: []string{"Mon 00:00 1h Europe/Berlin"}, now: "2026-11-22T23:30:00Z",
			wantOpen: true, wantNext: "2026-11-30T00:00:00+01:00",
		},
		"the next start after summer time ends is at the same wall clock, an hour later in UTC": {
			windows: []string{"Mon 09:00 1h Europe/Berlin"}, now: "2026-10-24T12:00:00Z",
			wantNext: "2026-10-26T09:00:00+01:00",
		},
		"the next start before summer time ends is in summer time": {
			windows: []string{"Mon 09:00 1h Europe/Berlin"}, now: "2026-10-17T12:00:00Z",
			wantNext: "2026-10-19T09:00:00+02:00",
		},
		"a window over the change from summer time lasts its duration, not to its wall clock": {
			// From 01:00 CEST (23:00 UTC) for 3h: until 02:00 UTC, 03:00 CET.
			windows: []string{"Sun 01:00 3h Europe/Berlin"}, now: "2026-10-25T01:59:00Z",
			wantOpen: true, wantNext: "2026-11-01T01:00:00+01:00",
		},
		"... and is closed once the duration has passed": {
			windows: []string{"Sun 01:00 3h Europe/Berlin"}, now: "2026-10-25T02:00:00Z",
			wantNext: "2026-11-01T01:00:00+01:00",
		},
		"a window in summer time opens at its wall clock": {
			windows: []string{"Sun 04:00 1h Europe/Berlin"}, now: "2027-03-28T02:00:00Z",
			wantOpen: true, wantNext: "2027-04-04T04:00:00+02:00",
		},
		"the next of several windows is the soonest": {
			windows: []string{"Sat 10:00 1h", "Tue 03:00 1h Asia/Tokyo", "Wed 00:00 1h"}, now: "2026-11-23T12:00:00Z",
			wantNext: "2026-11-24T03:00:00+09:00",
		},
		"one open window of several opens them": {
			windows: []string{"Sat 10:00 1h", "Mon 11:00 2h"}, now: "2026-11-23T12:00:00Z",
			wantOpen: true, wantNext: "2026-11-28T10:00:00Z",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var ws Windows
			for _, s := range tc.windows {
				ws = append(ws, mustWindow(t, s))
			}
			clock := testingclock.NewFakeClock(utc(tc.now))
			if got := ws.Open(clock.Now()); got != tc.wantOpen {
				t.Errorf("Open: %v, want %v", got, tc.wantOpen)
			}
			if got := ws.Next(clock.Now()).Format(time.RFC3339); got != tc.wantNext {
				t.Errorf("Next: %s, want %s", got, tc.wantNext)
			}
		})
	}
	if !(Windows{}).Open(time.Time{}) {
		t.Error("no windows: closed, want open at any time")
	}
}

func TestDecideOutsideWindow(t *testing.T) {
	// t0 is Monday 05:20 UTC.
	window := Windows{{Days: []string{"Mon"}, Start: "06:00", Duration: metav1.Duration{Duration: time.Hour}}}
	opens := time.Date(2026, 11, 23, 6, 0, 0, 0, time.UTC)
	outside := OutsideWindowReason(window, t0)
	if want := "OutsideWindow: no node starts before the next maintenance window, at 2026-11-23T06:00:00Z"; outside != want {
		t.Fatalf("reason %q, want %q", outside, want)
	}
	budget2 := Spec{MaxUnavailable: intstr.FromInt32(2), Windows: window}
	tests := map[string]struct {
		in   decideInput
		want Decision
	}{
		"outside every window no node starts, the reason says when the next opens, and the driver wakes then": {
			in:   decideInput{spec: budget2},
			want: Decision{Rollout: &Rollout{Status: Status{State: Running, Reason: outside}}, Write: true, Wake: opens},
		},
		"the reason is written once": {
			in:   decideInput{spec: budget2, status: Status{Reason: outside}},
			want: Decision{Rollout: &Rollout{Status: Status{State: Running, Reason: outside}}, Wake: opens},
		},
		"a node already started finishes, and a node marked but not assigned is assigned": {
			in: decideInput{spec: budget2,
				status:   Status{Reason: outside},
				observed: map[string]Observed{"n1": ours(applying), "n2": ours(idle)}},
			want: Decision{Rollout: &Rollout{Status: Status{State: Running, Reason: outside}}, Assign: []string{"n2"}, Wake: opens},
		},
		"a soak that ends first wakes the driver first": {
			in: decideInput{spec: Spec{Canary: 1, MaxUnavailable: intstr.FromInt32(2), Soak: metav1.Duration{Duration: time.Minute}, Windows: window},
				status:   Status{Reason: outside},
				observed: map[string]Observed{"n1": ours(running)}},
			want: Decision{Rollout: &Rollout{Status: Status{State: Running, Reason: outside, SoakSince: &metav1.Time{Time: t0}}}, Write: true, Wake: t0.Add(time.Minute)},
		},
		"once the window opens, nodes start and the reason is cleared": {
			in:   decideInput{spec: budget2, status: Status{Reason: outside}, now: opens},
			want: Decision{Rollout: runningAt(0, nil), Write: true, Start: []string{"n1", "n2"}, Assign: []string{"n1", "n2"}},
		},
		"a rollout whose nodes are all done is done outside a window": {
			in: decideInput{spec: Spec{Nodes: fleetOf(1), MaxUnavailable: intstr.FromInt32(1), Windows: window},
				status: Status{Reason: outside}, observed: map[string]Observed{"n1": ours(running)}},
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

// TestRunWaitsForTheWindow drives a rollout on a fake clock: before its
// window no node is assigned and the rollout says when the window opens;
// the driver sleeps until then, and the rollout completes once it opens.
func TestRunWaitsForTheWindow(t *testing.T) {
	client, names := newFleet(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	agents := newAgents(client, 10*time.Millisecond)
	agents.run(ctx, t)
	store := startRollout(t, client, Spec{Config: cm("good"), Nodes: names, MaxUnavailable: intstr.FromInt32(2),
		Windows: Windows{mustWindow(t, "Mon 06:00 1h")}})
	h := runHeld(ctx, t, client, store, Options{}, "OutsideWindow: no node starts before the next maintenance window, at 2026-11-23T06:00:00Z")
	h.clock.Step(39 * time.Minute)
	noneAssigned(ctx, t, client, names, "before the window opened")
	h.clock.Step(time.Minute)
	h.finished(t)
	agents.checkBudgetAndOnce(t, names, 2)
}

func TestWindowsValidate(t *testing.T) {
	ws := Windows{{Days: []string{"Mon"}, Start: "06:00", Duration: metav1.Duration{Duration: time.Hour}},
		{Days: []string{"Mon"}, Start: "06:00", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Europe/Nowhere"}}
	err := ws.Validate("spec.strategy.windows")
	if want := `spec.strategy.windows[1]: time zone "Europe/Nowhere"`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Validate: %v, want %s...", err, want)
	}
	if ws.Open(t0.Add(50*time.Minute)) != true || ws[1:].Open(t0.Add(50*time.Minute)) {
		t.Error("an invalid window must never be open, and must not close a valid one")
	}
}
