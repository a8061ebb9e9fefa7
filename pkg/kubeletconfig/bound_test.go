package kubeletconfig

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestJoinBounded(t *testing.T) {
	many := func(n int) []string {
		items := make([]string, n)
		for i := range items {
			items[i] = fmt.Sprintf("field%05d", i)
		}
		return items
	}
	// 2048 bytes hold 170 items of 10 bytes and their separators of 2.
	fit := strings.Join(many(20000)[:170], ", ")
	tests := map[string]struct {
		items []string
		sep   string
		want  string
	}{
		"none":       {},
		"a few":      {items: []string{"a", "b", "c"}, sep: ", ", want: "a, b, c"},
		"all fit":    {items: many(170), sep: ", ", want: fit},
		"one more":   {items: many(171), sep: ", ", want: fit + ", and 1 more"},
		"20 000":     {items: many(20000), sep: ", ", want: fit + ", and 19830 more"},
		"semicolons": {items: many(200), sep: "; ", want: strings.ReplaceAll(fit, ", ", "; ") + "; and 30 more"},
		"one item too long": {
			items: []string{strings.Repeat("x", 5000)},
			sep:   ", ",
			want:  strings.Repeat("x", 1024-len("… and 3999 more bytes")) + "… and 3999 more bytes",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, JoinBounded(tc.items, tc.sep)); diff != "" {
				t.Errorf("JoinBounded() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestShorten(t *testing.T) {
	tests := map[string]struct {
		s     string
		limit int
		want  string
	}{
		"short":    {s: "abc", limit: 3, want: "abc"},
		"long":     {s: strings.Repeat("a", 100), limit: 30, want: "aaaaaaaa… and 92 more bytes"},
		"on runes": {s: strings.Repeat("é", 50), limit: 30, want: "éééé… and 92 more bytes"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Shorten(tc.s, tc.limit)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Shorten() mismatch (-want +got):\n%s", diff)
			}
			if len(got) > tc.limit {
				t.Errorf("Shorten() has %d bytes, want at most %d", len(got), tc.limit)
			}
		})
	}
}

// TestFormatRefusalOfAnySize: the refusal of 20 000 fields keeps what to do
// after its bounded list.
func TestFormatRefusalOfAnySize(t *testing.T) {
	changes := make([]Change, 20000)
	for i := range changes {
		changes[i] = Change{Class: HostAccess, Field: fmt.Sprintf("featureGates[%q]", fmt.Sprintf("Gate%05d", i)), New: "true"}
	}
	got := FormatRefusal(changes, nil)
	if len(got) > MaxMessageBytes {
		t.Errorf("FormatRefusal() has %d bytes, want at most %d", len(got), MaxMessageBytes)
	}
	for _, want := range []string{`featureGates["Gate00000"] "" -> "true" (host-access), `, " more; to allow them, assign again with --allow-unsafe=host-access"} {
		if !strings.Contains(got, want) {
			t.Errorf("FormatRefusal() = %.200q..., want it to contain %q", got, want)
		}
	}
}
