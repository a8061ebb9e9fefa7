// Package goldenfile holds a test's expected output in a file: a golden file
// of testdata/, or a doc generated from the code.
package goldenfile

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Check compares got with the file at path. With update it writes got to
// path instead. regenerate is the command that rewrites the file, which a
// failure names.
func Check(t testing.TB, path string, got []byte, update bool, regenerate string) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (%s creates it)", err, regenerate)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s is stale: run %s (-want +got):\n%s", path, regenerate, diff)
	}
}
