package kubeletconfig

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Messages about a config are bounded, so that the report of any config
// fits where it goes: a Node's annotations hold 256 KiB together, the
// status error and ten history entries among them, and an Event or a
// condition message of megabytes is useless to read. A list shows its first
// items, then how many more; a value too long shows its start, then how many
// bytes more. Every list and value of the messages in this package goes
// through JoinBounded and Shorten, and the agent passes every message it
// reports through Shorten(msg, MaxMessageBytes).
const (
	// MaxMessageBytes bounds a whole message: a status error, a condition
	// message, an Event, a history entry.
	MaxMessageBytes = 4096
	// maxListBytes bounds a list of fields in a message, which leaves room
	// for the upstream status string before it and what to do after it.
	maxListBytes = 2048
	// maxValueBytes bounds one value (or field name) in a list.
	maxValueBytes = 128
)

// JoinBounded joins items with sep, as strings.Join does, as far as they fit
// in maxListBytes, and counts the rest: "a, b, and 12 more". An item longer
// than half of maxListBytes is shortened first.
func JoinBounded(items []string, sep string) string {
	var b strings.Builder
	for i, item := range items {
		item = Shorten(item, maxListBytes/2)
		n := len(item)
		if i > 0 {
			n += len(sep)
		}
		if i > 0 && b.Len()+n > maxListBytes {
			fmt.Fprintf(&b, "%sand %d more", sep, len(items)-i)
			break
		}
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(item)
	}
	return b.String()
}

// Shorten returns s when it has at most limit bytes, else its start, cut at
// a character boundary, and how many bytes it leaves out: "abc… and 12
// more bytes", in at most limit bytes when limit has room for that tail.
func Shorten(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	// The count has at most as many digits as len(s).
	tail := fmt.Sprintf("… and %d more bytes", len(s))
	cut := max(limit-len(tail), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… and %d more bytes", len(s)-cut)
}

// shortValue shortens a value or a field name shown in a list.
func shortValue(s string) string { return Shorten(s, maxValueBytes) }
