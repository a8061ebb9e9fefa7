package kubeletconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sergi/go-diff/diffmatchpatch"
	"sigs.k8s.io/yaml"
)

// Normalize turns a JSON or YAML document into YAML with sorted keys, so
// that two configs differ in text only where they differ in content.
// Numbers keep their exact digits.
func Normalize(data []byte) ([]byte, error) {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("normalize: %w", err)
	}
	v, err := decodeJSON(j)
	if err != nil {
		return nil, fmt.Errorf("normalize: %w", err)
	}
	out, err := yaml.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("normalize: %w", err)
	}
	return out, nil
}

// contextLines is the number of unchanged lines shown around each change.
const contextLines = 3

// UnifiedDiff returns a unified diff (as `diff -u` writes it, with 3 lines
// of context) that turns a into b, headed "--- aName" and "+++ bName".
// It returns "" when a and b are equal. Callers normally pass the output of
// Normalize.
func UnifiedDiff(aName, bName string, a, b []byte) string {
	if bytes.Equal(a, b) {
		return ""
	}
	lines := diffLines(string(a), string(b))

	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", aName, bName)
	for start := 0; start < len(lines); {
		// Find the next change; stop when none is left.
		first := start
		for first < len(lines) && lines[first].op == diffmatchpatch.DiffEqual {
			first++
		}
		if first == len(lines) {
			break
		}
		// Extend the hunk while the gap to the next change is small enough
		// for the two contexts to touch.
		last := first
		for i := first + 1; i < len(lines) && i-last <= 2*contextLines+1; i++ {
			if lines[i].op != diffmatchpatch.DiffEqual {
				last = i
			}
		}
		from := max(first-contextLines, start)
		to := min(last+contextLines+1, len(lines))
		writeHunk(&out, lines, from, to)
		start = to
	}
	return out.String()
}

// diffLine is one line of a line-level diff, with its 1-based line numbers
// in a and b (for an insert, aLine is the number of the a line before it;
// for a delete, likewise bLine).
type diffLine struct {
	op           diffmatchpatch.Operation
	text         string
	aLine, bLine int
}

func diffLines(a, b string) []diffLine {
	dmp := diffmatchpatch.New()
	ca, cb, table := dmp.DiffLinesToChars(a, b)
	diffs := dmp.DiffCharsToLines(dmp.DiffMain(ca, cb, false), table)

	var lines []diffLine
	aLine, bLine := 0, 0
	for _, d := range diffs {
		for _, text := range splitLines(d.Text) {
			switch d.Type {
			case diffmatchpatch.DiffEqual:
				aLine++
				bLine++
			case diffmatchpatch.DiffDelete:
				aLine++
			case diffmatchpatch.DiffInsert:
				bLine++
			}
			lines = append(lines, diffLine{op: d.Type, text: text, aLine: aLine, bLine: bLine})
		}
	}
	return lines
}

// splitLines splits s after each newline, keeping the newlines.
func splitLines(s string) []string {
	var lines []string
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			return append(lines, s)
		}
		lines = append(lines, s[:i+1])
		s = s[i+1:]
	}
	return lines
}

func writeHunk(out *strings.Builder, lines []diffLine, from, to int) {
	var aCount, bCount int
	for _, l := range lines[from:to] {
		if l.op != diffmatchpatch.DiffInsert {
			aCount++
		}
		if l.op != diffmatchpatch.DiffDelete {
			bCount++
		}
	}
	// The start is the first line of the range, or the line before an
	// empty range.
	aStart, bStart := lines[from].aLine, lines[from].bLine
	if lines[from].op == diffmatchpatch.DiffInsert {
		aStart++
	}
	if lines[from].op == diffmatchpatch.DiffDelete {
		bStart++
	}
	if aCount == 0 {
		aStart--
	}
	if bCount == 0 {
		bStart--
	}
	fmt.Fprintf(out, "@@ -%s +%s @@\n", hunkRange(aStart, aCount), hunkRange(bStart, bCount))
	for _, l := range lines[from:to] {
		prefix := " "
		switch l.op {
		case diffmatchpatch.DiffDelete:
			prefix = "-"
		case diffmatchpatch.DiffInsert:
			prefix = "+"
		}
		out.WriteString(prefix + l.text)
		if !strings.HasSuffix(l.text, "\n") {
			out.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// hunkRange formats a hunk range as diff -u does: "l" for one line,
// "l,n" otherwise.
func hunkRange(start, count int) string {
	if count == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, count)
}

// decodeJSON decodes one JSON value, keeping numbers as json.Number.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("unexpected data after the JSON value")
	}
	return v, nil
}
