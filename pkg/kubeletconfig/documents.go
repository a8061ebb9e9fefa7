package kubeletconfig

import (
	"bytes"
	"errors"
	"fmt"

	"sigs.k8s.io/yaml"
)

// ErrNoDocument means a config holds no document: it is empty, or holds
// only blank lines, comments and "---" separators.
var ErrNoDocument = errors.New("empty: a KubeletConfiguration is a JSON or YAML object with kind and apiVersion")

// DocumentsError means a config holds more than one YAML document. Decode
// and the kubelet read only the first.
type DocumentsError struct {
	// Count is how many documents hold something.
	Count int
	// Line is the 1-based line where the second of them begins.
	Line int
}

func (e *DocumentsError) Error() string {
	return fmt.Sprintf("%d YAML documents, the second at line %d", e.Count, e.Line)
}

// EmptyDocumentError means an empty YAML document comes before the
// config's. Decode and the kubelet read only the first document: null.
type EmptyDocumentError struct {
	// Line is the 1-based line where the empty document begins (its "---").
	Line int
	// ConfigLine is the 1-based line where the config's document begins.
	ConfigLine int
}

func (e *EmptyDocumentError) Error() string {
	return fmt.Sprintf("an empty YAML document (line %d) comes before the config (line %d), and only the first document is read: remove the empty one", e.Line, e.ConfigLine)
}

// SingleDocument checks that data holds exactly one YAML (or JSON)
// document, and that it is the one a kubelet reads: the first. It splits
// data as kubectl splits a multi-document file, at each line that starts
// with "---" followed by nothing, a space or a tab. Blank lines and
// comments before the first "---" are no document, as in YAML, so a
// leading "---" is fine; so are empty documents (blank lines, comments,
// null) after the config, such as a trailing "---". It returns
// ErrNoDocument, a *DocumentsError or an *EmptyDocumentError.
func SingleDocument(data []byte) error {
	var (
		count, second int // documents that hold something; where the second begins
		first, empty  int // where the first of them begins; where an empty one before it begins
		doc           bytes.Buffer
		start         = 1 // where the current document begins
		marked        bool
	)
	end := func() {
		blank := isBlank(doc.Bytes())
		switch {
		case !blank && holdsSomething(doc.Bytes()):
			count++
			switch count {
			case 1:
				first = start
			case 2:
				second = start
			}
		case (marked || !blank) && count == 0 && empty == 0:
			// An empty document after a "---", or a null before any:
			// YAML reads it as null.
			empty = start
		}
		doc.Reset()
	}
	for i, line := range bytes.SplitAfter(data, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("---")); ok && (len(bytes.TrimSpace(rest)) == 0 || rest[0] == ' ' || rest[0] == '\t') {
			end()
			// YAML allows content after the marker ("--- {a: 1}").
			start, marked, line = i+1, true, rest
		}
		doc.Write(line)
	}
	end()
	switch {
	case count == 0:
		return ErrNoDocument
	case count > 1:
		return &DocumentsError{Count: count, Line: second}
	case empty != 0:
		return &EmptyDocumentError{Line: empty, ConfigLine: first}
	}
	return nil
}

// isBlank reports whether doc holds only blank lines and comments.
func isBlank(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' {
			return false
		}
	}
	return true
}

// holdsSomething reports whether doc, not blank, is more than null. A
// document that does not parse holds something: the decoder names its
// error.
func holdsSomething(doc []byte) bool {
	j, err := yaml.YAMLToJSON(doc)
	return err != nil || string(j) != "null"
}
