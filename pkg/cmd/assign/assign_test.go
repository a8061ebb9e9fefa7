package assign

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
)

// options is a valid Options literal, as after Complete.
func options(edit func(o *Options)) *Options {
	o := &Options{
		Nodes:     util.NodeSelection{Names: []string{"n1"}},
		Config:    "cm-5fd8t4bhgb",
		Namespace: "kube-system",
		Key:       "kubelet",
		Carrier:   "auto",
		DryRun:    util.DryRunNone,
		Timeout:   DefaultTimeout,
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

func TestCheckKey(t *testing.T) {
	cm := func(data map[string]string, binary map[string][]byte) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cm"},
			Data:       data,
			BinaryData: binary,
		}
	}
	tests := map[string]struct {
		cm   *corev1.ConfigMap
		key  string
		want string
	}{
		"present": {cm: cm(map[string]string{"kubelet": "{}"}, nil), key: "kubelet"},
		"missing, lists keys": {
			cm:   cm(map[string]string{"z": "", "a": ""}, map[string][]byte{"m": nil}),
			key:  "kubelet",
			want: `configmap "kube-system/cm" has no key "kubelet": it has a, m, z; choose one with --key`,
		},
		"empty": {
			cm:   cm(nil, nil),
			key:  "kubelet",
			want: `configmap "kube-system/cm" has no key "kubelet": it has no keys at all`,
		},
		"binary": {
			cm:   cm(nil, map[string][]byte{"kubelet": []byte("{}")}),
			key:  "kubelet",
			want: `configmap "kube-system/cm": key "kubelet" is binaryData: a kubelet config must be text in data`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := CheckKey(tc.cm, tc.key)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("CheckKey() error:\n got: %s\nwant: %s", got, tc.want)
			}
		})
	}
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
