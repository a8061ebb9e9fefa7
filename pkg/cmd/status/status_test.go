package status

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/kubernetes/fake"

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
		"--all": {opts: Options{Nodes: util.NodeSelection{All: true}}},
		"--all and names": {
			opts: Options{Nodes: util.NodeSelection{Names: []string{"n1"}, All: true}},
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

// TestPrintChanges: while watching, a change prints its rows under the
// table printed before, as kubectl get -w does: aligned with it, without a
// second header, and after the header when the first list had no node.
func TestPrintChanges(t *testing.T) {
	src := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "cm", KubeletConfigKey: "kubelet"}}
	n1 := dkcstatus.NodeConfig{ObjectMeta: nodeMeta("n1"), Agent: dkcstatus.AgentNone}
	n2 := dkcstatus.NodeConfig{ObjectMeta: nodeMeta("n2"), Carrier: source.Annotation, ConfigSource: src, Status: &corev1.NodeConfigStatus{Assigned: src, Active: src}, Agent: dkcstatus.AgentReady}
	n1Assigned := n1
	n1Assigned.Carrier, n1Assigned.ConfigSource, n1Assigned.Agent = source.Annotation, src, dkcstatus.AgentReady
	n1Assigned.Status = &corev1.NodeConfigStatus{Assigned: src}
	tests := map[string]struct {
		output  string
		first   []dkcstatus.NodeConfig
		changes [][]dkcstatus.NodeConfig
		want    string
	}{
		"table rows under the table": {
			first:   []dkcstatus.NodeConfig{n2, n1},
			changes: [][]dkcstatus.NodeConfig{{n1Assigned}},
			want: "NODE   CARRIER      ASSIGNED         ACTIVE           LAST-KNOWN-GOOD   AGENT   ERROR\n" +
				"n1     <none>       <none>           <none>           <none>            none    <none>\n" +
				"n2     annotation   kube-system/cm   kube-system/cm   <local>           ready   <none>\n" +
				"n1     annotation   kube-system/cm   <local>          <local>           ready   <none>\n",
		},
		"no node at first: the header with the first rows": {
			changes: [][]dkcstatus.NodeConfig{{n1}, {n2}},
			want: "NODE   CARRIER   ASSIGNED   ACTIVE   LAST-KNOWN-GOOD   AGENT   ERROR\n" +
				"n1     <none>    <none>     <none>   <none>            none    <none>\n" +
				"n2     annotation   kube-system/cm   kube-system/cm   <local>           ready   <none>\n",
		},
		"names": {output: "name", first: []dkcstatus.NodeConfig{n1}, changes: [][]dkcstatus.NodeConfig{{n2, n1Assigned}}, want: "node/n1\nnode/n1\nnode/n2\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			o := &Options{Output: tc.output, IOStreams: genericiooptions.IOStreams{Out: &out}}
			if err := o.print(tc.first); err != nil {
				t.Fatal(err)
			}
			for _, changed := range tc.changes {
				if err := o.printChanges(changed); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("printChanges() (-want +got):\n%s", diff)
			}
		})
	}
}

func nodeMeta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

func TestRunWarnsAboutAgents(t *testing.T) {
	const assigned = `{"configMap":{"namespace":"kube-system","name":"cm","kubeletConfigKey":"kubelet"}}`
	nodes := []runtime.Object{
		// An assignment and no agent.
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{source.AssignedAnnotation: assigned}}},
		// No assignment and no agent: nothing to warn about.
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}},
		// An agent that took the assignment up.
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n3", Annotations: map[string]string{
			source.AssignedAnnotation: assigned,
			source.StatusAnnotation:   `{"assigned":` + assigned + `}`,
		}}},
	}
	tests := map[string]struct {
		output     string
		wantOut    string
		wantErrOut string
	}{
		"table": {
			wantOut: "NODE   CARRIER      ASSIGNED         ACTIVE    LAST-KNOWN-GOOD   AGENT   ERROR\n" +
				"n1     annotation   <none>           <none>    <none>            none    <none>\n" +
				"n2     <none>       <none>           <none>    <none>            none    <none>\n" +
				"n3     annotation   kube-system/cm   <local>   <local>           ready   <none>\n",
			wantErrOut: "Warning: node/n1 has an assignment, but no dkc agent has reported on it; see docs/install.md\n",
		},
		"names: no warning for scripts": {output: "name", wantOut: "node/n1\nnode/n2\nnode/n3\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			streams, _, out, errOut := genericiooptions.NewTestIOStreams()
			o := &Options{Output: tc.output, Client: fake.NewClientset(nodes...), IOStreams: streams}
			if err := o.Run(context.Background()); err != nil {
				t.Fatal(err)
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

// TestRunNoNodes: a cluster without nodes prints no table, and says so on
// stderr, as kubectl get says "No resources found"; -o name prints nothing.
func TestRunNoNodes(t *testing.T) {
	tests := map[string]struct {
		output     string
		wantErrOut string
	}{
		"table": {wantErrOut: "No nodes found.\n"},
		"wide":  {output: "wide", wantErrOut: "No nodes found.\n"},
		"name":  {output: "name"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			streams, _, out, errOut := genericiooptions.NewTestIOStreams()
			o := &Options{Output: tc.output, Client: fake.NewClientset(), IOStreams: streams}
			if err := o.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if out.Len() > 0 {
				t.Errorf("stdout: %q, want nothing", out)
			}
			if diff := cmp.Diff(tc.wantErrOut, errOut.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunExitCodes: a read of the status, once or as a watch that
// --timeout ends, exits 2 when a node reports an error for the config
// assigned to it, and 0 otherwise; an error of an earlier assignment, which
// the agent has not judged the new one against yet, is not the node's
// state.
func TestRunExitCodes(t *testing.T) {
	const (
		assigned = `{"configMap":{"namespace":"kube-system","name":"cm","kubeletConfigKey":"kubelet"}}`
		earlier  = `{"configMap":{"namespace":"kube-system","name":"old","kubeletConfigKey":"kubelet"}}`
	)
	node := func(name, status string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			source.AssignedAnnotation: assigned,
			source.StatusAnnotation:   status,
		}}}
	}
	active := node("n1", `{"assigned":`+assigned+`,"active":`+assigned+`,"lastKnownGood":`+assigned+`}`)
	failed := node("n2", `{"assigned":`+assigned+`,"error":"failed to validate config, see Kubelet log for details"}`)
	stale := node("n3", `{"assigned":`+earlier+`,"error":"failed to validate config, see Kubelet log for details"}`)
	tests := map[string]struct {
		nodes    []runtime.Object
		watch    bool
		wantCode int
		wantErr  string
	}{
		"active":                         {nodes: []runtime.Object{active}},
		"an error of an earlier config":  {nodes: []runtime.Object{active, stale}},
		"an error":                       {nodes: []runtime.Object{active, failed}, wantCode: 2, wantErr: `node "n2": config error: failed to validate config, see Kubelet log for details`},
		"watched until the timeout":      {nodes: []runtime.Object{active}, watch: true},
		"an error when the timeout ends": {nodes: []runtime.Object{active, failed}, watch: true, wantCode: 2, wantErr: `node "n2": config error: failed to validate config, see Kubelet log for details`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			streams, _, out, _ := genericiooptions.NewTestIOStreams()
			o := &Options{Output: "name", Client: fake.NewClientset(tc.nodes...), IOStreams: streams}
			if tc.watch {
				o.Watch, o.Timeout = true, 100*time.Millisecond
			}
			err := o.Run(context.Background())
			if got := util.ExitCode(err); got != tc.wantCode {
				t.Errorf("exit code %d (%v), want %d", got, err, tc.wantCode)
			}
			if err != nil && err.Error() != tc.wantErr {
				t.Errorf("error %q, want %q", err, tc.wantErr)
			}
			if out.Len() == 0 {
				t.Errorf("printed nothing before the exit code")
			}
		})
	}
}
