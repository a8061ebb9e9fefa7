package status

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/source"
	dkcstatus "github.com/kubectl-dkc/dkc/pkg/status"
)

func TestValidate(t *testing.T) {
	tests := map[string]struct {
		opts Options
		want string
	}{
		"all nodes":      {opts: Options{}},
		"names, wide":    {opts: Options{Nodes: util.NodeSelection{Names: []string{"n1"}}, Output: "wide"}},
		"selector, name": {opts: Options{Nodes: util.NodeSelection{Selector: "a=b"}, Output: "name"}},
		"json":           {opts: Options{Output: "json", Printer: &printers.JSONPrinter{}}},
		"watch timeout":  {opts: Options{Watch: true, Timeout: time.Minute}},
		"wait for error": {opts: Options{WaitFor: "error", Timeout: time.Second}},
		"names and selector": {
			opts: Options{Nodes: util.NodeSelection{Names: []string{"n1"}, Selector: "a=b"}},
			want: "name nodes in one way only: NODE arguments, -l/--selector, or --all",
		},
		"bad wait for": {
			opts: Options{WaitFor: "ready"},
			want: `invalid --wait-for "ready": must be "active" or "error"`,
		},
		"negative timeout": {
			opts: Options{Watch: true, Timeout: -time.Second},
			want: "invalid --timeout -1s: must not be negative (0 means forever)",
		},
		"timeout alone": {
			opts: Options{Timeout: time.Second},
			want: "--timeout needs -w/--watch or --wait-for",
		},
		"output without printer": {
			opts: Options{Output: "csv", PrintFlags: NewStatusOptions(genericiooptions.IOStreams{}).PrintFlags},
			want: `invalid --output "csv": must be one of wide, name, json, yaml, kyaml, go-template, go-template-file, template, templatefile, jsonpath, jsonpath-as-json, jsonpath-file`,
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

func TestPrintChanges(t *testing.T) {
	src := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "cm", KubeletConfigKey: "kubelet"}}
	items := []dkcstatus.NodeConfig{
		{ObjectMeta: nodeMeta("n2"), Carrier: source.Annotation, ConfigSource: src, Status: &corev1.NodeConfigStatus{Assigned: src, Active: src}},
		{ObjectMeta: nodeMeta("n1")},
	}
	tests := map[string]struct {
		output string
		want   string
	}{
		"table rows only": {
			output: "",
			want: "n1     <none>       <none>           <none>           <none>            <none>\n" +
				"n2     annotation   kube-system/cm   kube-system/cm   <local>           <none>\n",
		},
		"names": {output: "name", want: "node/n1\nnode/n2\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			o := &Options{Output: tc.output, IOStreams: genericiooptions.IOStreams{Out: &out}}
			if err := o.printChanges(items); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("printChanges() (-want +got):\n%s", diff)
			}
		})
	}
}

func nodeMeta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }
