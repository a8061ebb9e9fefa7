package diff

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

func TestParseSource(t *testing.T) {
	tests := map[string]struct {
		arg       string
		want      Source
		wantLabel string
		wantErr   string
	}{
		"file":                {arg: "kubelet.yaml", want: Source{Kind: File, Path: "kubelet.yaml"}, wantLabel: "kubelet.yaml"},
		"file in a directory": {arg: "configs/kubelet.yaml", want: Source{Kind: File, Path: "configs/kubelet.yaml"}, wantLabel: "configs/kubelet.yaml"},
		"file named like a node": {
			arg: "./node/n1", want: Source{Kind: File, Path: "./node/n1"}, wantLabel: "./node/n1",
		},
		"stdin":             {arg: "-", want: Source{Kind: Stdin}, wantLabel: "-"},
		"node":              {arg: "node/n1", want: Source{Kind: Node, Name: "n1"}, wantLabel: "node/n1"},
		"node short":        {arg: "no/n1", want: Source{Kind: Node, Name: "n1"}, wantLabel: "node/n1"},
		"configmap":         {arg: "configmap/x-1", want: Source{Kind: ConfigMap, Name: "x-1"}, wantLabel: "configmap/x-1"},
		"cm with namespace": {arg: "cm/ns/x", want: Source{Kind: ConfigMap, Namespace: "ns", Name: "x"}, wantLabel: "configmap/ns/x"},
		"assigned":          {arg: "assigned/n1", want: Source{Kind: Assigned, Name: "n1"}, wantLabel: "assigned/n1"},
		"configmaps, in kubectl's any case": {
			arg: "ConfigMaps/x-1", want: Source{Kind: ConfigMap, Name: "x-1"}, wantLabel: "configmap/x-1",
		},
		"empty": {
			arg:     "",
			wantErr: `invalid input "": name a file, -, node/NAME, configmap/NAME or assigned/NODE`,
		},
		"node without name": {
			arg:     "node/",
			wantErr: `invalid input "node/": name the node, as node/NAME`,
		},
		"assigned without name": {
			arg:     "assigned/",
			wantErr: `invalid input "assigned/": name the node, as assigned/NAME`,
		},
		"node with two parts": {
			arg:     "node/a/b",
			wantErr: `invalid input "node/a/b": write node/NAME (or ./node/a/b for a file)`,
		},
		"configmap with three parts": {
			arg:     "configmap/a/b/c",
			wantErr: `invalid input "configmap/a/b/c": write configmap/NAME or configmap/NAMESPACE/NAME (or ./configmap/a/b/c for a file)`,
		},
		"bad node name": {
			arg:     "node/N1",
			wantErr: `invalid input "node/N1": "N1": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseSource(tc.arg)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Fatalf("ParseSource(%q) error = %q, want %q", tc.arg, gotErr, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseSource(%q) (-want +got):\n%s", tc.arg, diff)
			}
			if err == nil && got.Label() != tc.wantLabel {
				t.Errorf("Label() = %q, want %q", got.Label(), tc.wantLabel)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := map[string]struct {
		opts Options
		want string
	}{
		"two files":      {opts: Options{Args: []string{"a", "b"}, Key: "kubelet"}},
		"stdin and node": {opts: Options{Args: []string{"-", "node/n1"}, Key: "kubelet"}},
		"one input": {
			opts: Options{Args: []string{"a"}, Key: "kubelet"},
			want: "diff takes two inputs, A and B, got 1: see kubectl dkc diff --help",
		},
		"stdin twice": {
			opts: Options{Args: []string{"-", "-"}, Key: "kubelet"},
			want: "only one of A and B can be - (stdin)",
		},
		"bad input": {
			opts: Options{Args: []string{"a", "node/"}, Key: "kubelet"},
			want: `invalid input "node/": name the node, as node/NAME`,
		},
		"bad key": {
			opts: Options{Args: []string{"a", "b"}, Key: ""},
			want: `invalid --key "": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`,
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

const (
	cfg110 = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 110\n"
	// The same content as cfg110, as JSON in another order.
	cfg110JSON = `{"maxPods": 110, "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"}`
	cfg42      = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 42\n"
)

const diff110to42 = `--- A
+++ B
@@ -1,3 +1,3 @@
 apiVersion: kubelet.config.k8s.io/v1beta1
 kind: KubeletConfiguration
-maxPods: 110
+maxPods: 42
`

func TestRun(t *testing.T) {
	assignedNode := func(name string, src string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if src != "" {
			n.Annotations = map[string]string{source.AssignedAnnotation: src}
		}
		return n
	}
	objects := []runtime.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c110", Namespace: "kube-system"}, Data: map[string]string{"kubelet": cfg110}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c42", Namespace: "other"}, Data: map[string]string{"cfg": cfg42}},
		assignedNode("local", ""),
		assignedNode("n42", `{"configMap":{"namespace":"other","name":"c42","kubeletConfigKey":"cfg"}}`),
	}
	tests := map[string]struct {
		a, b     string
		stdin    string
		key      string
		dropIn   bool
		wantOut  string
		wantCode int
		wantErr  string
	}{
		"same content, other format": {a: "FILE:" + cfg110, b: "-", stdin: cfg110JSON},
		"different files": {
			a: "FILE:" + cfg110, b: "-", stdin: cfg42,
			wantOut: diff110to42, wantCode: 1,
		},
		"configmap and file": {a: "configmap/c110", b: "FILE:" + cfg110},
		"configmap in a namespace with --key": {
			a: "configmap/other/c42", b: "FILE:" + cfg42, key: "cfg",
		},
		"configmap without the --key": {
			a: "configmap/c110", b: "configmap/other/c42", key: "cfg",
			wantErr: `configmap "kube-system/c110" has no key "cfg": it has kubelet; choose one with --key`,
		},
		"assigned": {
			a: "configmap/c110", b: "assigned/n42",
			wantOut: "--- configmap/c110\n+++ assigned/n42\n" + diff110to42[len("--- A\n+++ B\n"):], wantCode: 1,
		},
		"no assignment": {
			a: "assigned/local", b: "-", stdin: cfg110,
			wantErr: `node "local" has no assigned config: it runs its local config; compare node/local instead`,
		},
		"missing configmap": {
			a: "configmap/nope", b: "-",
			wantErr: `read configmap "nope" in namespace "kube-system": configmaps "nope" not found`,
		},
		"empty stdin": {
			a: "configmap/c110", b: "-", stdin: "\n",
			wantErr: "-: empty: a KubeletConfiguration is a JSON or YAML object with kind and apiVersion",
		},
		"not a KubeletConfiguration": {
			a: "configmap/c110", b: "-", stdin: "kind: ConfigMap\napiVersion: v1\n",
			wantErr: `-: load kubelet config: kind "ConfigMap" is not supported: want kind: KubeletConfiguration, apiVersion "v1" is not supported: want apiVersion: kubelet.config.k8s.io/v1beta1`,
		},
		"two documents": {
			a: "configmap/c110", b: "-", stdin: cfg110 + "---\n" + cfg42,
			wantErr: "-: 2 YAML documents, the second at line 4: diff compares one KubeletConfiguration on each side",
		},
		"a drop-in over a configmap": {
			a: "configmap/c110", b: "-", dropIn: true,
			stdin:   "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 42\n",
			wantOut: "--- configmap/c110\n+++ - over configmap/c110\n" + diff110to42[len("--- A\n+++ B\n"):], wantCode: 1,
		},
		"a drop-in that changes nothing": {
			a: "configmap/c110", b: "-", dropIn: true,
			stdin: "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\n",
		},
		"missing file": {
			a: "/nonexistent/kubelet.yaml", b: "-",
			wantErr: "read open /nonexistent/kubelet.yaml: no such file or directory",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{tc.a, tc.b}
			for i, arg := range args {
				if content, ok := strings.CutPrefix(arg, "FILE:"); ok {
					args[i] = filepath.Join(dir, string(rune('a'+i))+".yaml")
					if err := os.WriteFile(args[i], []byte(content), 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			streams, in, out, _ := genericiooptions.NewTestIOStreams()
			in.WriteString(tc.stdin)
			key := tc.key
			if key == "" {
				key = "kubelet"
			}
			o := &Options{
				Args:      args,
				Key:       key,
				DropIn:    tc.dropIn,
				Namespace: "kube-system",
				client:    fake.NewClientset(objects...),
				IOStreams: streams,
			}
			err := o.Run(context.Background())
			var exitErr *util.ExitError
			gotCode, gotErr := 0, ""
			switch {
			case errors.As(err, &exitErr):
				gotCode = exitErr.Code
				if exitErr.Err != nil {
					t.Errorf("a difference must exit silently, got message %q", exitErr.Err)
				}
			case err != nil:
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Errorf("Run() error = %q, want %q", gotErr, tc.wantErr)
			}
			if gotCode != tc.wantCode {
				t.Errorf("exit code = %d, want %d", gotCode, tc.wantCode)
			}
			wantOut := tc.wantOut
			if wantOut == diff110to42 {
				wantOut = "--- " + args[0] + "\n+++ -\n" + wantOut[len("--- A\n+++ B\n"):]
			}
			if diff := cmp.Diff(wantOut, out.String()); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTrouble(t *testing.T) {
	tests := map[string]struct {
		err      error
		wantCode int
	}{
		"none":       {err: nil, wantCode: 0},
		"difference": {err: &util.ExitError{Code: ExitDiffer}, wantCode: 1},
		"error":      {err: errors.New("boom"), wantCode: 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := util.ExitCode(trouble(tc.err)); got != tc.wantCode {
				t.Errorf("exit code = %d, want %d", got, tc.wantCode)
			}
		})
	}
}

// TestEffective: each side is checked as one KubeletConfiguration, and a
// drop-in is merged over its base as the kubelet merges --config-dir
// files: maps key by key, lists and scalars replaced, null deletes.
func TestEffective(t *testing.T) {
	const head = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\n"
	const base = head + `maxPods: 110
clusterDNS: [10.0.0.10, 10.0.0.11]
cpuManagerPolicy: static
evictionHard:
  memory.available: 100Mi
  nodefs.available: 10%
`
	tests := map[string]struct {
		a, b         string
		dropIn       bool
		wantA, wantB string
		wantWarnings []string
		wantErr      string
	}{
		"two complete configs": {
			a: base, b: head + "maxPods: 42\n",
			wantA: base, wantB: head + "maxPods: 42\n",
		},
		"a drop-in": {
			a: base, dropIn: true,
			b: head + `maxPods: 42
clusterDNS: [10.0.0.12]
cpuManagerPolicy: null
evictionHard:
  memory.available: 200Mi
`,
			wantA: base,
			wantB: head + `maxPods: 42
clusterDNS: [10.0.0.12]
evictionHard:
  memory.available: 200Mi
  nodefs.available: 10%
`,
		},
		"an unknown field": {
			a: base, b: head + "maxPod: 1\n",
			wantA: base, wantB: head + "maxPod: 1\n",
			wantWarnings: []string{`B: unknown field "maxPod"`},
		},
		"an empty base": {
			a: "", b: base, dropIn: true,
			wantErr: "A: empty: a KubeletConfiguration is a JSON or YAML object with kind and apiVersion",
		},
		"a drop-in without kind": {
			a: base, b: "maxPods: 42\n", dropIn: true,
			wantErr: `B: load kubelet config: missing "kind": add kind: KubeletConfiguration, missing "apiVersion": add apiVersion: kubelet.config.k8s.io/v1beta1`,
		},
		"a duplicate field": {
			a: base + "maxPods: 1\n", b: base,
			wantErr: `A: load kubelet config: duplicate field "maxPods" (line 9)`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a, b, warnings, err := Effective([2]string{"A", "B"}, [2][]byte{[]byte(tc.a), []byte(tc.b)}, tc.dropIn)
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWarnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if err != nil {
				return
			}
			for _, side := range []struct{ want, got string }{{tc.wantA, string(a)}, {tc.wantB, string(b)}} {
				want, err := kubeletconfig.Normalize([]byte(side.want))
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(string(want), side.got); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
