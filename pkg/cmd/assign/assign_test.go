package assign

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/utiltest"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// options is a valid Options literal, as after Complete.
func options(edit func(o *Options)) *Options {
	o := &Options{
		Nodes:      util.NodeSelection{Names: []string{"n1"}},
		Config:     "cm-5fd8t4bhgb",
		Namespace:  "kube-system",
		Key:        "kubelet",
		Carrier:    "auto",
		DryRun:     util.DryRunNone,
		Timeout:    DefaultTimeout,
		PrintFlags: util.NewPrintFlags(),
	}
	if edit != nil {
		edit(o)
	}
	return o
}

func TestValidate(t *testing.T) {
	tests := map[string]struct {
		opts *Options
		want string
	}{
		"valid":             {opts: options(nil)},
		"valid selector":    {opts: options(func(o *Options) { o.Nodes = util.NodeSelection{Selector: "pool=canary"} })},
		"valid all, native": {opts: options(func(o *Options) { o.Nodes = util.NodeSelection{All: true}; o.Carrier = "native" })},
		"valid wait":        {opts: options(func(o *Options) { o.Wait = true; o.Timeout = 0 })},
		"valid server dry run": {
			opts: options(func(o *Options) { o.DryRun = util.DryRunServer }),
		},
		"no nodes": {
			opts: options(func(o *Options) { o.Nodes = util.NodeSelection{} }),
			want: "no nodes given: name them as arguments, or use -l/--selector or --all",
		},
		"nodes and all": {
			opts: options(func(o *Options) { o.Nodes.All = true }),
			want: "name nodes in one way only: NODE arguments, -l/--selector, or --all",
		},
		"no config": {
			opts: options(func(o *Options) { o.Config = "" }),
			want: "--config is required: name the ConfigMap that holds the kubelet config (kubectl dkc push prints it)",
		},
		"bad config": {
			opts: options(func(o *Options) { o.Config = "Bad_Name" }),
			want: `invalid --config "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		},
		"config as push -o name prints it": {opts: options(func(o *Options) { o.Config = "configmap/cm-5fd8t4bhgb" })},
		"config of another type": {
			opts: options(func(o *Options) { o.Config = "secret/cm" }),
			want: `invalid --config "secret/cm": "secret" is not a ConfigMap type: write NAME or configmap/NAME`,
		},
		"bad key": {
			opts: options(func(o *Options) { o.Key = "a/b" }),
			want: `invalid --key "a/b": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`,
		},
		"bad carrier": {
			opts: options(func(o *Options) { o.Carrier = "spec" }),
			want: `invalid --carrier "spec": must be one of auto, native, annotation`,
		},
		"bad dry run": {
			opts: options(func(o *Options) { o.DryRun = "yes" }),
			want: `invalid --dry-run "yes": must be "none", "client", or "server"`,
		},
		"wait with dry run": {
			opts: options(func(o *Options) { o.Wait = true; o.DryRun = util.DryRunClient }),
			want: "--wait cannot be used with --dry-run: nothing would change to wait for",
		},
		"a short digest": {
			opts: options(func(o *Options) { o.Digest = "sha256:6f1ed002ab55" }),
			want: `invalid --digest "sha256:6f1ed002ab55": write the full digest, "sha256:" and 64 lowercase hex digits, as kubectl dkc push prints it`,
		},
		"negative timeout": {
			opts: options(func(o *Options) { o.Timeout = -time.Second }),
			want: "invalid --timeout -1s: must not be negative (0 means forever)",
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
				t.Errorf("Validate() error:\n got: %s\nwant: %s", got, tc.want)
			}
		})
	}
}

func TestSource(t *testing.T) {
	got := options(func(o *Options) { o.Namespace = "ops"; o.Key = "config" }).Source()
	want := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: "ops", Name: "cm-5fd8t4bhgb", KubeletConfigKey: "config",
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Source() (-want +got):\n%s", diff)
	}
}

func TestRun(t *testing.T) {
	const (
		assignedCM = `{"configMap":{"namespace":"kube-system","name":"cm-5fd8t4bhgb","kubeletConfigKey":"kubelet"}}`
		reported   = `{"assigned":{"configMap":{"namespace":"kube-system","name":"old","kubeletConfigKey":"kubelet"}}}`
	)
	configMap := func(edit func(cm *corev1.ConfigMap)) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cm-5fd8t4bhgb", Labels: map[string]string{source.ConfigLabel: "true"}},
			Data:       map[string]string{"kubelet": "{}"},
		}
		if edit != nil {
			edit(cm)
		}
		return cm
	}
	// node has an agent (it reported a status) unless annotations say else.
	node := func(name string, annotations map[string]string, spec *corev1.NodeConfigSource) *corev1.Node {
		if annotations == nil {
			annotations = map[string]string{source.StatusAnnotation: reported}
		}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}, Spec: corev1.NodeSpec{ConfigSource: spec}}
	}
	tests := map[string]struct {
		opts        *Options
		cm          *corev1.ConfigMap
		nodes       []*corev1.Node
		wantOut     string
		wantErrOut  string
		wantErr     string
		wantPatches int
		wantAssign  map[string]string // node -> annotation after Run
		mayUse      []string          // the classes the caller may use
	}{
		"annotation": {
			opts:        options(func(o *Options) { o.Carrier = "annotation" }),
			nodes:       []*corev1.Node{node("n1", nil, nil)},
			wantOut:     "node/n1 assigned kube-system/cm-5fd8t4bhgb (annotation)\n",
			wantPatches: 1,
			wantAssign:  map[string]string{"n1": assignedCM},
		},
		"-o name": {
			opts:        options(func(o *Options) { o.Carrier = "annotation"; *o.PrintFlags.OutputFormat = "name" }),
			nodes:       []*corev1.Node{node("n1", nil, nil)},
			wantOut:     "node/n1\n",
			wantPatches: 1,
			wantAssign:  map[string]string{"n1": assignedCM},
		},
		"client dry run sends nothing and names the carrier it assumed": {
			opts:       options(func(o *Options) { o.DryRun = util.DryRunClient }),
			nodes:      []*corev1.Node{node("n1", nil, nil)},
			wantOut:    "node/n1 assigned kube-system/cm-5fd8t4bhgb (annotation) (dry run)\n",
			wantErrOut: "Warning: " + ClientDryRunNote + "\n",
			wantAssign: map[string]string{"n1": ""},
		},
		"client dry run takes native where the node holds spec.configSource": {
			opts:    options(func(o *Options) { o.DryRun = util.DryRunClient }),
			nodes:   []*corev1.Node{node("n1", nil, &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "old", KubeletConfigKey: "kubelet"}})},
			wantOut: "node/n1 assigned kube-system/cm-5fd8t4bhgb (native) (dry run)\n",
		},
		"client dry run, -o jsonpath shows the patched node": {
			opts: options(func(o *Options) {
				o.DryRun = util.DryRunClient
				o.Carrier = "annotation"
				*o.PrintFlags.OutputFormat = `jsonpath={.kind} {.metadata.annotations.kubectl-dkc\.io/config-source}`
			}),
			nodes:      []*corev1.Node{node("n1", nil, nil)},
			wantOut:    "Node " + assignedCM,
			wantAssign: map[string]string{"n1": ""},
		},
		"client dry run, native not checked": {
			opts:       options(func(o *Options) { o.DryRun = util.DryRunClient; o.Carrier = "native" }),
			nodes:      []*corev1.Node{node("n1", nil, nil)},
			wantOut:    "node/n1 assigned kube-system/cm-5fd8t4bhgb (native) (dry run)\n",
			wantErrOut: "Warning: " + NativeClientDryRunNote + "\n",
		},
		"several nodes restart at once": {
			opts: options(func(o *Options) { o.Nodes = util.NodeSelection{All: true}; o.Carrier = "annotation" }),
			nodes: []*corev1.Node{
				node("n1", nil, nil), node("n2", nil, nil),
				node("n3", map[string]string{source.AssignedAnnotation: assignedCM, source.StatusAnnotation: reported}, nil),
			},
			wantOut: "node/n1 assigned kube-system/cm-5fd8t4bhgb (annotation)\n" +
				"node/n2 assigned kube-system/cm-5fd8t4bhgb (annotation)\n" +
				"node/n3 assigned kube-system/cm-5fd8t4bhgb (annotation)\n",
			wantErrOut:  "Warning: 2 nodes get the new config at once, and their kubelets all restart at the same time; to restart a few at a time, use kubectl dkc rollout start --config cm-5fd8t4bhgb\n",
			wantPatches: 3,
		},
		"no agent": {
			opts:        options(func(o *Options) { o.Carrier = "annotation" }),
			nodes:       []*corev1.Node{node("n1", map[string]string{}, nil)},
			wantOut:     "node/n1 assigned kube-system/cm-5fd8t4bhgb (annotation)\n",
			wantErrOut:  "Warning: node/n1: no dkc agent has reported on this node yet; unless one runs there, nothing will apply the assignment (see docs/install.md)\n",
			wantPatches: 1,
		},
		"config in binaryData": {
			opts: options(func(o *Options) { o.Carrier = "annotation" }),
			cm: configMap(func(cm *corev1.ConfigMap) {
				cm.Data = nil
				cm.BinaryData = map[string][]byte{"kubelet": []byte("{}")}
			}),
			nodes:       []*corev1.Node{node("n1", nil, nil)},
			wantOut:     "node/n1 assigned kube-system/cm-5fd8t4bhgb (annotation)\n",
			wantPatches: 1,
		},
		"missing key": {
			opts:    options(nil),
			cm:      configMap(func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"z": "", "a": ""} }),
			nodes:   []*corev1.Node{node("n1", nil, nil)},
			wantErr: `configmap "kube-system/cm-5fd8t4bhgb" has no key "kubelet": it has a, z; choose one with --key`,
		},
		"no keys": {
			opts:    options(nil),
			cm:      configMap(func(cm *corev1.ConfigMap) { cm.Data = nil }),
			nodes:   []*corev1.Node{node("n1", nil, nil)},
			wantErr: `configmap "kube-system/cm-5fd8t4bhgb" has no key "kubelet": it has no keys at all`,
		},
		"the reviewed digest": {
			opts:        options(func(o *Options) { o.Carrier = "annotation"; o.Digest = source.Digest([]byte("{}")) }),
			nodes:       []*corev1.Node{node("n1", nil, nil)},
			wantOut:     "node/n1 assigned kube-system/cm-5fd8t4bhgb (annotation)\n",
			wantPatches: 1,
			wantAssign:  map[string]string{"n1": assignedCM},
		},
		"other bytes than the reviewed digest are refused before any write": {
			opts:       options(func(o *Options) { o.Carrier = "annotation"; o.Digest = source.Digest([]byte("reviewed")) }),
			nodes:      []*corev1.Node{node("n1", nil, nil)},
			wantErr:    `configmap "kube-system/cm-5fd8t4bhgb" holds ` + source.ShortDigest(source.Digest([]byte("{}"))) + ` under "kubelet", not the reviewed --digest ` + source.ShortDigest(source.Digest([]byte("reviewed"))) + `: its bytes changed since they were reviewed; review them again and pass their digest, or push the reviewed config under a new name (kubectl dkc push prints its digest)`,
			wantAssign: map[string]string{"n1": ""},
		},
		"a class the caller may not use is refused before any write": {
			opts:       options(func(o *Options) { o.Carrier = "annotation"; o.AllowUnsafe = "security,host-access" }),
			nodes:      []*corev1.Node{node("n1", nil, nil)},
			mayUse:     []string{"host-access"},
			wantErr:    `assign configmap "kube-system/cm-5fd8t4bhgb": ` + source.UnsafeClassesDenied([]string{"security"}),
			wantAssign: map[string]string{"n1": ""},
		},
		"classes the caller may use are pinned": {
			opts:        options(func(o *Options) { o.Carrier = "annotation"; o.AllowUnsafe = "security" }),
			nodes:       []*corev1.Node{node("n1", nil, nil)},
			mayUse:      []string{"security"},
			wantOut:     "node/n1 assigned kube-system/cm-5fd8t4bhgb (annotation)\n",
			wantPatches: 1,
			wantAssign:  map[string]string{"n1": assignedCM},
		},
		"a client dry run asks nothing, as it sends nothing": {
			opts:       options(func(o *Options) { o.Carrier = "annotation"; o.AllowUnsafe = "security"; o.DryRun = util.DryRunClient }),
			nodes:      []*corev1.Node{node("n1", nil, nil)},
			wantOut:    "node/n1 assigned kube-system/cm-5fd8t4bhgb (annotation) (dry run)\n",
			wantAssign: map[string]string{"n1": ""},
		},
		"a server dry run asks first, as admission would refuse it": {
			opts:    options(func(o *Options) { o.Carrier = "annotation"; o.AllowUnsafe = "security"; o.DryRun = util.DryRunServer }),
			nodes:   []*corev1.Node{node("n1", nil, nil)},
			wantErr: `assign configmap "kube-system/cm-5fd8t4bhgb": ` + source.UnsafeClassesDenied([]string{"security"}),
		},
		// What a config changes on a node is read from its kubelet
		// (util.ReportOptIns, tested with a configz server there) only for
		// a dry run; the fake clientset has no REST client to read it with.
		"a dry run reports, per node, what the config changes there": {
			opts:       options(func(o *Options) { o.Carrier = "annotation"; o.DryRun = util.DryRunClient }),
			cm:         configMap(func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"kubelet": kubeletConfig} }),
			nodes:      []*corev1.Node{node("n1", nil, nil)},
			wantOut:    "node/n1 assigned kube-system/cm-5fd8t4bhgb (annotation) (dry run)\n",
			wantErrOut: "Warning: node/n1: what the config changes there is not known: no REST client to read /configz with\n",
			wantAssign: map[string]string{"n1": ""},
		},
		"an assignment does not": {
			opts:        options(func(o *Options) { o.Carrier = "annotation" }),
			cm:          configMap(func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"kubelet": kubeletConfig} }),
			nodes:       []*corev1.Node{node("n1", nil, nil)},
			wantOut:     "node/n1 assigned kube-system/cm-5fd8t4bhgb (annotation)\n",
			wantPatches: 1,
		},
		"not pushed by dkc": {
			opts:        options(func(o *Options) { o.Carrier = "annotation" }),
			cm:          configMap(func(cm *corev1.ConfigMap) { cm.Labels = nil }),
			nodes:       []*corev1.Node{node("n1", nil, nil)},
			wantOut:     "node/n1 assigned kube-system/cm-5fd8t4bhgb (annotation)\n",
			wantErrOut:  `Warning: configmap "kube-system/cm-5fd8t4bhgb" has no label kubectl-dkc.io/kubelet-config: it was not pushed by kubectl dkc push` + "\n",
			wantPatches: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cm := tc.cm
			if cm == nil {
				cm = configMap(nil)
			}
			objs := []runtime.Object{cm}
			for _, n := range tc.nodes {
				objs = append(objs, n)
			}
			client := fake.NewClientset(objs...)
			utiltest.Authorize(client, utiltest.MayUse(tc.mayUse...))
			streams, _, out, errOut := genericiooptions.NewTestIOStreams()
			o := tc.opts
			o.Client, o.IOStreams = client, streams
			err := o.Run(context.Background())
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Fatalf("Run() error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantOut, out.String()); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantErrOut, errOut.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			var verbs []string
			patches := 0
			for _, a := range client.Actions() {
				verbs = append(verbs, a.GetVerb())
				if a.GetVerb() == "patch" {
					patches++
				}
			}
			if patches != tc.wantPatches {
				t.Errorf("sent %d patches, want %d (actions: %v)", patches, tc.wantPatches, verbs)
			}
			for name, want := range tc.wantAssign {
				n, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, n.Annotations[source.AssignedAnnotation]); diff != "" {
					t.Errorf("node %s assignment (-want +got):\n%s", name, diff)
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

func TestDroppedError(t *testing.T) {
	err := droppedError("n1")
	want := `assign node "n1": the apiserver dropped spec.configSource (apiservers 1.26 and later drop it silently): use --carrier=annotation, or --carrier=auto`
	if err.Error() != want {
		t.Errorf("got %q, want %q", err, want)
	}
	if errors.Unwrap(err) != nil {
		t.Errorf("droppedError wraps %v, want nothing", errors.Unwrap(err))
	}
}

// kubeletConfig is a KubeletConfiguration that sets a field of a class
// that needs an opt-in where it changes.
const kubeletConfig = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nstaticPodPath: /srv/pods\n"
