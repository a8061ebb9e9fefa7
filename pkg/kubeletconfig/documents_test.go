package kubeletconfig

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSingleDocument(t *testing.T) {
	const cfg = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\n"
	tests := map[string]struct {
		data string
		want error
	}{
		"one":                          {data: cfg},
		"json":                         {data: `{"kind":"KubeletConfiguration"}`},
		"leading separator":            {data: "---\n" + cfg},
		"comments before the marker":   {data: "# the node's config\n\n---\n" + cfg},
		"separator with comment":       {data: "--- # the config\n" + cfg},
		"trailing separator":           {data: cfg + "---\n"},
		"empty documents after":        {data: cfg + "---\n# nothing here\n---\n\n---\n"},
		"a null document after":        {data: cfg + "---\nnull\n"},
		"crlf":                         {data: "---\r\nkind: KubeletConfiguration\r\n---\r\n"},
		"dashes that are not a marker": {data: "kind: KubeletConfiguration\nx: ---\n"},
		"empty":                        {data: "", want: ErrNoDocument},
		"blank":                        {data: "\n  \n", want: ErrNoDocument},
		"comments and separators":      {data: "# a comment\n---\n---\n", want: ErrNoDocument},
		"two": {
			data: cfg + "---\n" + cfg,
			want: &DocumentsError{Count: 2, Line: 3},
		},
		"two, each after a marker": {
			data: "---\n# the first\n" + cfg + "---\n\n" + cfg,
			want: &DocumentsError{Count: 2, Line: 5},
		},
		"three": {
			data: cfg + "---\nmaxPods: 1\n---\nmaxPods: 2\n",
			want: &DocumentsError{Count: 3, Line: 3},
		},
		"content after the marker": {
			data: cfg + "--- {maxPods: 1}\n",
			want: &DocumentsError{Count: 2, Line: 3},
		},
		"a second that does not parse": {
			data: cfg + "---\n: :\n",
			want: &DocumentsError{Count: 2, Line: 3},
		},
		// YAML reads the empty document first, as null: the kubelet would
		// not find the config.
		"an empty document before": {
			data: "---\n# nothing here\n---\n" + cfg,
			want: &EmptyDocumentError{Line: 1, ConfigLine: 3},
		},
		"two markers before": {
			data: "---\n---\n" + cfg,
			want: &EmptyDocumentError{Line: 1, ConfigLine: 2},
		},
		"null before": {
			data: "null\n---\n" + cfg,
			want: &EmptyDocumentError{Line: 1, ConfigLine: 2},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := SingleDocument([]byte(tc.data))
			var docs *DocumentsError
			var empty *EmptyDocumentError
			switch want := tc.want.(type) {
			case nil:
				if err != nil {
					t.Errorf("SingleDocument() = %v, want nil", err)
				}
			case *DocumentsError:
				if !errors.As(err, &docs) {
					t.Fatalf("SingleDocument() = %v, want %v", err, want)
				}
				if diff := cmp.Diff(want, docs); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			case *EmptyDocumentError:
				if !errors.As(err, &empty) {
					t.Fatalf("SingleDocument() = %v, want %v", err, want)
				}
				if diff := cmp.Diff(want, empty); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			default:
				if !errors.Is(err, want) {
					t.Errorf("SingleDocument() = %v, want %v", err, want)
				}
			}
		})
	}
}

func TestDocumentErrorMessages(t *testing.T) {
	for want, err := range map[string]error{
		"2 YAML documents, the second at line 7": &DocumentsError{Count: 2, Line: 7},
		"an empty YAML document (line 1) comes before the config (line 3), and only the first document is read: remove the empty one": &EmptyDocumentError{Line: 1, ConfigLine: 3},
	} {
		if diff := cmp.Diff(want, err.Error()); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	}
}
