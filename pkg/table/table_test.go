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
		"upper-case headers, 3 spaces, - for empty, cut at a line break": {
			table: func() *metav1.Table {
				t := New("Name", "Long-Column", "Message")
				AddRow(t, "a", OrNone(""), "one line")
				AddRow(t, "bb", 12, "first\nsecond")
				return t
			},
			want: "NAME   LONG-COLUMN   MESSAGE\n" +
				"a      -             one line\n" +
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
