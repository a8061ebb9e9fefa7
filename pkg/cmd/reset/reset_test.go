package reset

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

func TestValidate(t *testing.T) {
	tests := map[string]struct {
		opts Options
		want string
	}{
		"valid names":    {opts: Options{Nodes: util.NodeSelection{Names: []string{"n1", "n2"}}, DryRun: util.DryRunNone}},
		"valid selector": {opts: Options{Nodes: util.NodeSelection{Selector: "pool in (a,b)"}, DryRun: util.DryRunServer}},
		"valid wait":     {opts: Options{Nodes: util.NodeSelection{All: true}, DryRun: util.DryRunNone, Wait: true, Timeout: time.Minute}},
		"no nodes": {
			opts: Options{DryRun: util.DryRunNone},
			want: "no nodes given: name them as arguments, or use -l/--selector or --all",
		},
		"bad selector": {
			opts: Options{Nodes: util.NodeSelection{Selector: "a b"}, DryRun: util.DryRunNone},
			want: `invalid --selector "a b": unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt`,
		},
		"bad dry run": {
			opts: Options{Nodes: util.NodeSelection{All: true}, DryRun: "true"},
			want: `invalid --dry-run "true": must be "none", "client", or "server"`,
		},
		"wait with dry run": {
			opts: Options{Nodes: util.NodeSelection{All: true}, DryRun: util.DryRunServer, Wait: true},
			want: "--wait cannot be used with --dry-run: nothing would change to wait for",
		},
		"negative timeout": {
			opts: Options{Nodes: util.NodeSelection{All: true}, DryRun: util.DryRunNone, Timeout: -time.Minute},
			want: "invalid --timeout -1m0s: must not be negative (0 means forever)",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.opts.PrintFlags = util.NewPrintFlags()
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

func TestRun(t *testing.T) {
	const assigned = `{"configMap":{"namespace":"kube-system","name":"a","kubeletConfigKey":"kubelet"}}`
	node := func(name string, annotations map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
	}
	withAssignment := map[string]string{source.AssignedAnnotation: assigned}
	tests := map[string]struct {
		dryRun, output string
		nodes          []*corev1.Node
		wantOut        string
		wantErrOut     string
		wantPatches    int
		wantLeft       map[string]string // node -> assignment after Run
	}{
		"reset": {
			nodes:       []*corev1.Node{node("n1", withAssignment), node("n2", nil)},
			wantOut:     "node/n1 reset to its local config\nnode/n2 already on its local config\n",
			wantPatches: 1,
			wantLeft:    map[string]string{"n1": ""},
		},
		"-o name": {
			output:      "name",
			nodes:       []*corev1.Node{node("n1", withAssignment), node("n2", nil)},
			wantOut:     "node/n1\nnode/n2\n",
			wantPatches: 1,
		},
		"client dry run sends nothing": {
			dryRun:   util.DryRunClient,
			nodes:    []*corev1.Node{node("n1", withAssignment)},
			wantOut:  "node/n1 reset to its local config (dry run)\n",
			wantLeft: map[string]string{"n1": assigned},
		},
		"client dry run, -o jsonpath shows the node without its assignment": {
			dryRun:   util.DryRunClient,
			output:   `jsonpath={.kind}:{.metadata.annotations}`,
			nodes:    []*corev1.Node{node("n1", map[string]string{source.AssignedAnnotation: assigned, "keep": "1"})},
			wantOut:  `Node:{"keep":"1"}`,
			wantLeft: map[string]string{"n1": assigned},
		},
		"several nodes restart at once": {
			nodes: []*corev1.Node{node("n1", withAssignment), node("n2", withAssignment), node("n3", nil)},
			wantOut: "node/n1 reset to its local config\nnode/n2 reset to its local config\n" +
				"node/n3 already on its local config\n",
			wantErrOut:  "Warning: 2 nodes go back to their local config at once, and their kubelets all restart at the same time; to restart a few at a time, use kubectl dkc rollout start --to-local\n",
			wantPatches: 2,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var objs []runtime.Object
			for _, n := range tc.nodes {
				objs = append(objs, n)
			}
			client := fake.NewClientset(objs...)
			streams, _, out, errOut := genericiooptions.NewTestIOStreams()
			o := &Options{
				Nodes: util.NodeSelection{All: true}, DryRun: util.DryRunNone, PrintFlags: util.NewPrintFlags(),
				Client: client, IOStreams: streams,
			}
			if tc.dryRun != "" {
				o.DryRun = tc.dryRun
			}
			*o.PrintFlags.OutputFormat = tc.output
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
			if err := o.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantOut, out.String()); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantErrOut, errOut.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			patches := 0
			for _, a := range client.Actions() {
				if a.GetVerb() == "patch" {
					patches++
				}
			}
			if patches != tc.wantPatches {
				t.Errorf("sent %d patches, want %d", patches, tc.wantPatches)
			}
			for name, want := range tc.wantLeft {
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
