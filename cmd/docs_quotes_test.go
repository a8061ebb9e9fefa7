package cmd_test

import (
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	dkcstatus "github.com/kubectl-dkc/dkc/pkg/status"
)

// upstreamWords are the parts of messages that troubleshooting.md quotes
// which dkc passes on from elsewhere: the apiserver, the kernel, systemd,
// the Go runtime and kubectl's drain library print them, not dkc's code.
var upstreamWords = []string{
	"is forbidden",
	"cannot list resource",
	"read-only file system",
	"address already in use",
	"job failed",
	"timed out waiting for the condition",
	"exactly one subfield must be non-nil, but all were nil",
	"global timeout reached", // k8s.io/kubectl/pkg/drain
}

// TestDocsQuotedMessages holds the messages docs/troubleshooting.md quotes
// to the code: each one, in the first column of a table of what you see or
// wherever it begins with "error: ", is cut at its placeholders (NODE,
// NAME, ..., <detail>) and at the ": " and "; " that join wrapped errors,
// and every piece of two words or more must be in a string literal of dkc's
// code (or be one of upstreamWords). A message reworded in the code and not
// in the doc fails here.
func TestDocsQuotedMessages(t *testing.T) {
	const path = "docs/troubleshooting.md"
	d, ok := docsByPath(t)[path]
	if !ok {
		t.Fatalf("no %s", path)
	}
	literals := goStringLiterals(t, "../pkg", "../cmd", "../main.go")
	templates := make([][]string, len(literals))
	for i, l := range literals {
		templates[i] = templateWords(l)
	}

	var quoted []span
	for _, tbl := range d.tables() {
		if h := strings.ToLower(tbl.header[0]); h != "you see" && h != "symptom" {
			continue
		}
		for _, r := range tbl.rows {
			for _, m := range codeSpan.FindAllStringSubmatch(r.cells[0], -1) {
				quoted = append(quoted, span{line: r.line, text: m[1]})
			}
		}
	}
	for _, s := range d.spans() {
		if strings.HasPrefix(s.text, "error: ") {
			quoted = append(quoted, s)
		}
	}
	if len(quoted) < 20 {
		t.Fatalf("%s: found %d quoted messages; the test no longer finds them", path, len(quoted))
	}
	checked := 0
	for _, q := range quoted {
		if !isMessage(q.text) {
			continue
		}
		for _, piece := range messagePieces(q.text) {
			checked++
			if !inAny(piece, upstreamWords) && !printed(piece, literals, templates) {
				t.Errorf("%s quotes %q, but no string of dkc's code holds %q: quote the message as the code prints it", d.at(q.line), q.text, piece)
			}
		}
	}
	if checked < 40 {
		t.Errorf("%s: only %d pieces of messages checked; the test no longer finds them", path, checked)
	}
}

// isMessage says whether inline code s is a message rather than a command,
// a flag, a path or a single word (a reason, a field).
func isMessage(s string) bool {
	if !strings.Contains(s, " ") {
		return false
	}
	for _, p := range []string{"kubectl ", "curl ", "journalctl ", "--", "/", "sudo ", "systemctl "} {
		if strings.HasPrefix(s, p) {
			return false
		}
	}
	return !commandLine.MatchString(s)
}

// commandLine is a command written without kubectl dkc: `assign --wait`.
var commandLine = regexp.MustCompile(`^[a-z]+( [a-z]+)? --`)

// placeholder is what a quoted message writes in place of a value: a word
// in capitals (NODE, NS/NAME, PID N), "...", <detail>; and what a message
// fills in from a value, which the code's string holds as a verb: a quoted
// string, a word with a digit, a dash, a dot, a slash or an equals sign
// (kube-system, node/NODE, 2m0s, kubelet.service, --allow-unsafe=CLASS).
var placeholder = regexp.MustCompile(`\.\.\.|<[a-z ]+>|\b[A-Z][A-Z0-9_]*\b|"[^"]*"|[^\s"]*[-./=0-9][^\s"]*`)

// messagePieces cuts message at its placeholders and at the separators of
// wrapped errors, and returns the pieces of two words or more. The text of
// an error the code wraps with %w (status.ErrTimeout) is cut out first: no
// one string of the code holds it and what wraps it.
func messagePieces(message string) []string {
	message = strings.TrimPrefix(message, "error: ")
	message = strings.ReplaceAll(message, dkcstatus.ErrTimeout.Error(), ": ")
	var out []string
	for _, part := range placeholder.Split(message, -1) {
		for _, piece := range regexp.MustCompile(`: |; `).Split(part, -1) {
			piece = strings.Trim(piece, " \"'()`,.:;/")
			if strings.Count(piece, " ") >= 1 && len(piece) >= 8 {
				out = append(out, piece)
			}
		}
	}
	return out
}

func inAny(piece string, in []string) bool {
	for _, s := range in {
		if strings.Contains(s, piece) {
			return true
		}
	}
	return false
}

// goStringLiterals returns the string literals, unquoted, of the Go files
// (tests left out) under roots.
func goStringLiterals(t *testing.T, roots ...string) []string {
	t.Helper()
	var out []string
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			fset := token.NewFileSet()
			var s scanner.Scanner
			s.Init(fset.AddFile(path, -1, len(src)), src, nil, 0)
			for {
				_, tok, lit := s.Scan()
				if tok == token.EOF {
					break
				}
				if tok != token.STRING {
					continue
				}
				if v, err := strconv.Unquote(lit); err == nil {
					out = append(out, v)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// verb is a fmt verb in a format string.
var verb = regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z]`)

// templateWords splits a format string into words; a word with a verb in
// it is "" and stands for any words the verb prints.
func templateWords(format string) []string {
	words := strings.Fields(format)
	for i, w := range words {
		if verb.MatchString(w) {
			words[i] = ""
		}
	}
	return words
}

// printed says whether the code prints piece: it is in a literal, or it
// is a run of words that a template prints with its verbs filled in. Each
// "" of the template stands for one word, the run may begin or end inside
// a word, and at least two of its words are the template's own (one of a
// piece of two). A template that ends in a verb may go on with what
// another string prints: "... has an assignment, but %s" and the cause.
func printed(piece string, literals []string, templates [][]string) bool {
	if inAny(piece, literals) {
		return true
	}
	words := strings.Fields(piece)
	for _, tw := range templates {
		if !slices.Contains(tw, "") {
			continue
		}
		for start := range tw {
			n := len(tw) - start
			if n >= len(words) {
				if fills(words, tw[start:start+len(words)]) {
					return true
				}
				continue
			}
			if tw[len(tw)-1] == "" && n >= 3 && fills(words[:n-1], tw[start:len(tw)-1]) &&
				printed(strings.Join(words[n-1:], " "), literals, templates) {
				return true
			}
		}
	}
	return false
}

// fills says whether words are what template prints, word for word.
func fills(words, template []string) bool {
	own := 0
	for i, w := range words {
		t := template[i]
		switch {
		case t == "":
			continue
		case i == 0 && len(words) > 1:
			// The piece may begin in the middle of a word: "(lease".
			if !strings.HasSuffix(t, w) {
				return false
			}
		case i == len(words)-1:
			if !strings.HasPrefix(t, w) {
				return false
			}
		case t != w:
			return false
		}
		own++
	}
	return own >= min(2, len(words)-1)
}
