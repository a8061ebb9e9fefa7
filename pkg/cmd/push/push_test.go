package push

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
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

const validConfig = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 10\n"

// validOptions returns Options that pass Validate; tests change one field.
func validOptions() Options {
	return Options{
		Filename:   "kubelet.yaml",
		Name:       "my-node-config",
		Namespace:  "kube-system",
		Key:        "kubelet",
		AppendHash: true,
		DryRun:     util.DryRunNone,
		PrintFlags: util.NewPrintFlags(),
	}
}

func TestValidate(t *testing.T) {
	tests := map[string]struct {
		change func(*Options)
		want   string
	}{
		"valid": {change: func(*Options) {}},
		"stdin": {change: func(o *Options) { o.Filename = "-" }},
		"server dry run as yaml": {change: func(o *Options) {
			o.DryRun = util.DryRunServer
			*o.PrintFlags.OutputFormat = "yaml"
		}},
		"no file": {
			change: func(o *Options) { o.Filename = "" },
			want:   "no FILE given: name the KubeletConfiguration file, or - to read stdin",
		},
		"no name": {
			change: func(o *Options) { o.Name = "" },
			want:   "--name is required: name the ConfigMap, e.g. --name my-node-config",
		},
		"uppercase name": {
			change: func(o *Options) { o.Name = "My" },
			want:   `invalid --name "My": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		},
		"name too long for the hash": {
			change: func(o *Options) { o.Name = strings.Repeat("a", 243) },
			want:   `invalid --name "` + strings.Repeat("a", 243) + `": at most 242 characters with --append-hash, which adds 11`,
		},
		"long name without the hash": {
			change: func(o *Options) { o.Name, o.AppendHash = strings.Repeat("a", 243), false },
		},
		"bad key": {
			change: func(o *Options) { o.Key = "a/b" },
			want:   `invalid --key "a/b": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`,
		},
		"bad dry run": {
			change: func(o *Options) { o.DryRun = "true" },
			want:   `invalid --dry-run "true": must be "none", "client", or "server"`,
		},
		"bad output": {
			change: func(o *Options) { *o.PrintFlags.OutputFormat = "wider" },
			want:   `invalid --output "wider": must be one of wide, json, yaml, kyaml, name, go-template, go-template-file, template, templatefile, jsonpath, jsonpath-as-json, jsonpath-file`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := validOptions()
			tc.change(&o)
			err := o.Validate()
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

func TestCreate(t *testing.T) {
	existing := func(data string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "kube-system"},
			Data:       map[string]string{"kubelet": data},
		}
	}
	tests := map[string]struct {
		existing *corev1.ConfigMap
		wantOp   string
		wantErr  error
	}{
		"new":            {wantOp: "created"},
		"same data":      {existing: existing(validConfig), wantOp: "unchanged"},
		"different data": {existing: existing("maxPods: 1\n"), wantErr: ErrConflict},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset()
			if tc.existing != nil {
				client = fake.NewClientset(tc.existing)
			}
			cm, err := source.BuildConfigMap("kube-system", "x", "kubelet", []byte(validConfig), false, false)
			if err != nil {
				t.Fatal(err)
			}
			_, op, err := Create(context.Background(), client, cm, false)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Create() error = %v, want %v", err, tc.wantErr)
			}
			if op != tc.wantOp {
				t.Errorf("Create() operation = %q, want %q", op, tc.wantOp)
			}
			got, err := client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "x", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := validConfig
			if tc.existing != nil {
				want = tc.existing.Data["kubelet"]
			}
			if got.Data["kubelet"] != want {
				t.Errorf("stored data = %q, want %q", got.Data["kubelet"], want)
			}
		})
	}
}

func TestRun(t *testing.T) {
	tests := map[string]struct {
		input      string
		change     func(*Options)
		existing   *corev1.ConfigMap
		wantOut    string
		wantErrOut string
		wantErr    string
	}{
		"created": {
			input:   validConfig,
			wantOut: "configmap/my-node-config-fktmh22d66 created, digest " + source.Digest([]byte(validConfig)) + "\n",
		},
		"unchanged": {
			input:    validConfig,
			existing: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "my-node-config-fktmh22d66", Namespace: "kube-system"}, Data: map[string]string{"kubelet": validConfig}},
			wantOut:  "configmap/my-node-config-fktmh22d66 unchanged, digest " + source.Digest([]byte(validConfig)) + "\n",
		},
		"unchanged, with the ConfigMap's opt-in annotation": {
			input: validConfig,
			existing: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "my-node-config-fktmh22d66", Namespace: "kube-system",
				Annotations: map[string]string{"kubectl-dkc.io/allow-unsafe": "*"}}, Data: map[string]string{"kubelet": validConfig}},
			wantOut:    "configmap/my-node-config-fktmh22d66 unchanged, digest " + source.Digest([]byte(validConfig)) + "\n",
			wantErrOut: `Warning: configmap "kube-system/my-node-config-fktmh22d66" carries kubectl-dkc.io/allow-unsafe=*, which no agent honours: the opt-in is the assigner's (--allow-unsafe=CLASS on assign or rollout start)` + "\n",
		},
		"conflict without hash": {
			input:    validConfig,
			change:   func(o *Options) { o.AppendHash = false },
			existing: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "my-node-config", Namespace: "kube-system"}, Data: map[string]string{"kubelet": "x"}},
			wantErr:  `configmap "my-node-config" in namespace "kube-system": configmap already exists with different data: push under a new --name, or use --append-hash so that each content gets its own name`,
		},
		"conflict with hash": {
			input:    validConfig,
			existing: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "my-node-config-fktmh22d66", Namespace: "kube-system"}, Data: map[string]string{"kubelet": "x"}},
			wantErr:  `configmap "my-node-config-fktmh22d66" in namespace "kube-system": configmap already exists with different data, although its name carries the hash of this content: it was changed after it was pushed; delete it, or push under a new --name`,
		},
		"client dry run by name": {
			input:   validConfig,
			change:  func(o *Options) { o.DryRun = util.DryRunClient },
			wantOut: "configmap/my-node-config-fktmh22d66 created, digest " + source.Digest([]byte(validConfig)) + " (dry run)\n",
		},
		"wide: the name, key and digest": {
			input:  validConfig,
			change: func(o *Options) { o.DryRun = util.DryRunClient; *o.PrintFlags.OutputFormat = "wide" },
			wantOut: "NAME                                  KEY       DIGEST                                                                    RESULT\n" +
				"configmap/my-node-config-fktmh22d66   kubelet   " + source.Digest([]byte(validConfig)) + "   created (dry run)\n",
		},
		"client dry run as json": {
			input: validConfig,
			change: func(o *Options) {
				o.DryRun = util.DryRunClient
				*o.PrintFlags.OutputFormat = "jsonpath={.kind} {.apiVersion} {.metadata.name}"
			},
			wantOut: "ConfigMap v1 my-node-config-fktmh22d66",
		},
		"missing kind": {
			input:   "apiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 10\n",
			wantErr: `stdin: load kubelet config: missing "kind": add kind: KubeletConfiguration`,
		},
		"unknown field": {
			input:   validConfig + "maxPod: 3\n",
			wantErr: `stdin: load kubelet config: unknown field "maxPod" (fix the field, or use --allow-unknown-fields to push it anyway)`,
		},
		"unknown field allowed": {
			input:      validConfig + "maxPod: 3\n",
			change:     func(o *Options) { o.AllowUnknownFields = true },
			wantOut:    "configmap/my-node-config-g8m6kcb5ht created, digest " + source.Digest([]byte(validConfig+"maxPod: 3\n")) + "\n",
			wantErrOut: "Warning: stdin: unknown field \"maxPod\"\n",
		},
		"weak security settings": {
			input:   validConfig + "authorization:\n  mode: AlwaysAllow\nreadOnlyPort: 10255\nprotectKernelDefaults: false\n",
			change:  func(o *Options) { o.DryRun = util.DryRunClient; *o.PrintFlags.OutputFormat = "name" },
			wantOut: "configmap/my-node-config-ghbk4588h8\n",
			wantErrOut: "Warning: stdin: weak security setting: authorization.mode is AlwaysAllow: every authenticated request is authorized\n" +
				"Warning: stdin: weak security setting: readOnlyPort is 10255: the kubelet serves an unauthenticated read-only port\n" +
				"Warning: stdin: weak security setting: protectKernelDefaults is false: the kubelet changes kernel settings it disagrees with instead of failing\n",
		},
		// Whether a path or an endpoint changes, and so which --allow-unsafe
		// it needs, depends on what a node runs: push cannot know, and says
		// nothing (assign --dry-run does). A snapshot sets them all.
		"fields that need an opt-in where they change": {
			input:   validConfig + "staticPodURL: http://198.51.100.9/pods.yaml\ncontainerRuntimeEndpoint: unix:///tmp/evil.sock\n",
			change:  func(o *Options) { o.DryRun = util.DryRunClient; *o.PrintFlags.OutputFormat = "name" },
			wantOut: "configmap/my-node-config-dttt9ktdhm\n",
		},
		// A value no node can run is judged without one.
		"values no node applies": {
			input:   validConfig + "podPidsLimit: 10\nevictionHard:\n  memory.available: 100%\n",
			change:  func(o *Options) { o.DryRun = util.DryRunClient; *o.PrintFlags.OutputFormat = "name" },
			wantOut: "configmap/my-node-config-466d296tbt\n",
			wantErrOut: "Warning: stdin: values that cannot be right on any node, which every agent refuses: " +
				`evictionHard["memory.available"] 100% (at or above 100%: the node always crosses it); podPidsLimit 10 (below 16: no pod, the node's DaemonSets included, can start its containers)` + "\n",
		},
		"two documents": {
			input:   validConfig + "---\n" + validConfig,
			wantErr: "stdin: 2 YAML documents, the second at line 4: push takes one KubeletConfiguration per ConfigMap; push each document from a file of its own",
		},
		"a leading and a trailing marker": {
			input:   "# the node's config\n---\n" + validConfig + "---\n",
			change:  func(o *Options) { o.DryRun = util.DryRunClient; *o.PrintFlags.OutputFormat = "name" },
			wantOut: "configmap/my-node-config-75d874tb75\n",
		},
		"an empty document first": {
			input:   "---\n---\n" + validConfig,
			wantErr: "stdin: an empty YAML document (line 1) comes before the config (line 2), and only the first document is read: remove the empty one",
		},
		"empty": {
			input:   "# nothing yet\n",
			wantErr: "stdin: empty: a KubeletConfiguration is a JSON or YAML object with kind and apiVersion",
		},
		"invalid value": {
			input:   "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: -1\n",
			wantErr: "stdin: validate kubelet config: maxPods: must be >= 0, got -1",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			streams, in, out, errOut := genericiooptions.NewTestIOStreams()
			in.WriteString(tc.input)
			o := validOptions()
			o.Filename = "-"
			o.IOStreams = streams
			o.client = fake.NewClientset()
			if tc.existing != nil {
				o.client = fake.NewClientset(tc.existing)
			}
			if tc.change != nil {
				tc.change(&o)
			}
			if o.DryRun == util.DryRunClient {
				o.client = nil // a client dry run must not need one
			}
			err := o.Run(context.Background())
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Errorf("Run() error = %q, want %q", got, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantOut, out.String()); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantErrOut, errOut.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunReadsFileBytesUnchanged(t *testing.T) {
	// JSON with its own spacing: the ConfigMap holds exactly these bytes.
	input := "{\"kind\": \"KubeletConfiguration\",   \"apiVersion\": \"kubelet.config.k8s.io/v1beta1\"}"
	path := filepath.Join(t.TempDir(), "kubelet.json")
	if err := os.WriteFile(path, []byte(input), 0o600); err != nil {
		t.Fatal(err)
	}
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	o := validOptions()
	o.Filename = path
	o.AppendHash = false
	o.IOStreams = streams
	client := fake.NewClientset()
	o.client = client
	if err := o.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "my-node-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Data["kubelet"]; got != input {
		t.Errorf("data[kubelet] = %q, want the file's bytes %q", got, input)
	}
}
