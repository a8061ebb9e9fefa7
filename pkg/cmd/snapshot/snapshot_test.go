package snapshot

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
)

func TestValidate(t *testing.T) {
	tests := map[string]struct {
		opts Options
		want string
	}{
		"one node": {
			opts: Options{Nodes: util.NodeSelection{Names: []string{"n1"}}, Output: "json", Concurrency: 1},
		},
		"all as yaml": {
			opts: Options{Nodes: util.NodeSelection{All: true}, Output: "yaml", Concurrency: 8},
		},
		"no nodes": {
			opts: Options{Output: "json", Concurrency: 8},
			want: "no nodes given: name them as arguments, or use -l/--selector or --all",
		},
		"names and --all": {
			opts: Options{Nodes: util.NodeSelection{Names: []string{"n1"}, All: true}, Output: "json", Concurrency: 8},
			want: "name nodes in one way only: NODE arguments, -l/--selector, or --all",
		},
		"node name with a slash": {
			opts: Options{Nodes: util.NodeSelection{Names: []string{"node/n1"}}, Output: "json", Concurrency: 8},
			want: `invalid node name "node/n1": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		},
		"bad output": {
			opts: Options{Nodes: util.NodeSelection{All: true}, Output: "table", Concurrency: 8},
			want: `invalid --output "table": must be one of json, yaml`,
		},
		"zero concurrency": {
			opts: Options{Nodes: util.NodeSelection{All: true}, Output: "json"},
			want: "--concurrency must be at least 1, got 0",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.opts.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Validate() = %q, want %q", got, tc.want)
			}
		})
	}
}

// fakeFetch serves documents per node; a node without one fails.
func fakeFetch(docs map[string]string) func(context.Context, string) ([]byte, error) {
	return func(_ context.Context, node string) ([]byte, error) {
		doc, ok := docs[node]
		if !ok {
			return nil, errors.New("connection refused")
		}
		return []byte(doc), nil
	}
}

const (
	docA = "{\n  \"kind\": \"KubeletConfiguration\",\n  \"maxPods\": 110\n}\n"
	docB = "{\n  \"authorization\": {\n    \"mode\": \"AlwaysAllow\"\n  },\n  \"kind\": \"KubeletConfiguration\",\n  \"readOnlyPort\": 10255\n}\n"
)

func TestRun(t *testing.T) {
	docs := map[string]string{"a": docA, "b": docB, "scalar": "110\n"}
	tests := map[string]struct {
		names      []string
		all        bool
		output     string
		outputDir  bool
		wantOut    string
		wantErrOut string
		wantErr    string
		wantFiles  map[string]string
	}{
		"one node as json": {
			names:   []string{"a"},
			output:  "json",
			wantOut: docA,
		},
		"one node as yaml": {
			names:   []string{"a"},
			output:  "yaml",
			wantOut: "kind: KubeletConfiguration\nmaxPods: 110\n",
		},
		"several nodes as a json stream in name order": {
			names:   []string{"scalar", "a", "a"},
			output:  "json",
			wantOut: docA + "110\n",
		},
		"several nodes as yaml documents": {
			names:      []string{"b", "a"},
			output:     "yaml",
			wantOut:    "---\n# node/a\nkind: KubeletConfiguration\nmaxPods: 110\n---\n# node/b\nauthorization:\n  mode: AlwaysAllow\nkind: KubeletConfiguration\nreadOnlyPort: 10255\n",
			wantErrOut: "Warning: node/b: the snapshot copies a weak setting: authorization.mode is AlwaysAllow: every authenticated request is authorized\nWarning: node/b: the snapshot copies a weak setting: readOnlyPort is 10255: the kubelet serves an unauthenticated read-only port\n",
		},
		"all nodes from the cluster": {
			all:     true,
			output:  "json",
			wantOut: docA + "110\n",
		},
		"a failed node does not stop the others": {
			names:   []string{"down", "a", "gone"},
			output:  "json",
			wantOut: docA,
			wantErr: `[snapshot node "down": connection refused, snapshot node "gone": connection refused]`,
		},
		"output dir": {
			names:     []string{"b", "a", "down"},
			output:    "json",
			outputDir: true,
			wantOut:   "DIR/kubelet_configz_a\nDIR/kubelet_configz_b\n",
			wantErrOut: "Warning: node/b: the snapshot copies a weak setting: authorization.mode is AlwaysAllow: every authenticated request is authorized\n" +
				"Warning: node/b: the snapshot copies a weak setting: readOnlyPort is 10255: the kubelet serves an unauthenticated read-only port\n",
			wantErr:   `snapshot node "down": connection refused`,
			wantFiles: map[string]string{"kubelet_configz_a": docA, "kubelet_configz_b": docB},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			streams, _, out, errOut := genericiooptions.NewTestIOStreams()
			dir := filepath.Join(t.TempDir(), "new", "dir")
			o := &Options{
				Nodes:       util.NodeSelection{Names: tc.names, All: tc.all},
				Output:      tc.output,
				Concurrency: 2,
				client: fake.NewClientset(
					&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "scalar"}},
					&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
				),
				fetch:     fakeFetch(docs),
				IOStreams: streams,
			}
			if tc.outputDir {
				o.OutputDir = dir
			}
			err := o.Run(context.Background())
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Errorf("Run() error = %q, want %q", gotErr, tc.wantErr)
			}
			gotOut := string(bytes.ReplaceAll(out.Bytes(), []byte(dir), []byte("DIR")))
			if diff := cmp.Diff(tc.wantOut, gotOut); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantErrOut, errOut.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if !tc.outputDir {
				return
			}
			got := map[string]string{}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				b, err := os.ReadFile(filepath.Join(dir, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				got[e.Name()] = string(b)
			}
			if diff := cmp.Diff(tc.wantFiles, got); diff != "" {
				t.Errorf("files in --output-dir (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFileName(t *testing.T) {
	if got, want := FileName("node-1.example.com"), "kubelet_configz_node-1.example.com"; got != want {
		t.Errorf("FileName() = %q, want %q", got, want)
	}
}

func TestWriteFileAtomicReplaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	for _, content := range []string{"old\n", "new\n"} {
		if err := WriteFileAtomic(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "new\n" {
		t.Errorf("content = %q, want %q", got, "new\n")
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the file (no temp files left)", len(entries))
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode = %v, want 0644", fi.Mode().Perm())
	}
}
