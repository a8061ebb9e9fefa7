package table

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPrint(t *testing.T) {
	tests := map[string]struct {
		table func() *metav1.Table
		want  string
	}{
		"upper-case headers, 3 spaces, <none> for empty, cut at a line break": {
			table: func() *metav1.Table {
				t := New("Name", "Long-Column", "Message")
				AddRow(t, "a", OrNone(""), "one line")
				AddRow(t, "bb", 12, "first\nsecond")
				return t
			},
			want: "NAME   LONG-COLUMN   MESSAGE\n" +
				"a      <none>        one line\n" +
				"bb     12            first...\n",
		},
		"no rows, nothing": {
			table: func() *metav1.Table { return New("Name") },
			want:  "",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Print(&buf, tc.table()); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, buf.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestStream: the header once, before the first row, and the later rows
// aligned with the earlier ones, as kubectl get -w prints them.
func TestStream(t *testing.T) {
	row := func(cells ...any) *metav1.Table {
		t := New("Name", "State", "Message")
		if len(cells) > 0 {
			AddRow(t, cells...)
		}
		return t
	}
	var buf bytes.Buffer
	s := NewStream(&buf)
	for _, tab := range []*metav1.Table{
		row(), // no rows yet: no header either
		row("node-long-name", "ready", "-"),
		row("n1", "verifying", "-"),
		row("n2", "a-much-longer-state", "-"),
	} {
		if err := s.Print(tab); err != nil {
			t.Fatal(err)
		}
	}
	want := "NAME             STATE   MESSAGE\n" +
		"node-long-name   ready   -\n" +
		"n1               verifying   -\n" +
		"n2               a-much-longer-state   -\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{
		"":                               "",
		"ok":                             "ok",
		"kubelet:\n  exited\t2":          "kubelet: exited 2",
		"  spaces   inside\r\nand out  ": "spaces inside and out",
	} {
		if got := OneLine(in); got != want {
			t.Errorf("OneLine(%q) = %q, want %q", in, got, want)
		}
	}
}
