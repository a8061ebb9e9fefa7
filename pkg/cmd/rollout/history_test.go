package rollout

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// TestHistoryOutput: the table by default, and every -o of PrintFlags on a
// NodeConfigHistory whose entries are the annotation's.
func TestHistoryOutput(t *testing.T) {
	at := metav1.NewTime(time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC))
	entries := []source.HistoryEntry{
		{Source: cm("a"), Time: at, Result: source.ResultApplied},
		{Time: at, Result: "RolledBack", Message: "health gate:\n  kubelet not Ready"},
	}
	annotation, err := json.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	withHistory := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{source.HistoryAnnotation: string(annotation)}}}
	without := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}
	tests := map[string]struct {
		node, output, want, wantErr string
		wantErrOut                  string
	}{
		"table": {node: "n1", want: "TIME                   RESULT       CONFIG          MESSAGE\n" +
			"2025-05-01T12:00:00Z   Applied      kube-system/a   \n" +
			"2025-05-01T12:00:00Z   RolledBack   <local>         health gate: kubelet not Ready\n"},
		"table, no history": {node: "n2", wantErrOut: "No history found for node/n2.\n"},
		"json": {node: "n1", output: "json", want: `{
    "kind": "NodeConfigHistory",
    "apiVersion": "kubectl-dkc.io/v1alpha1",
    "metadata": {
        "name": "n1"
    },
    "entries": [
        {
            "source": {
                "configMap": {
                    "namespace": "kube-system",
                    "name": "a",
                    "kubeletConfigKey": "kubelet"
                }
            },
            "time": "2025-05-01T12:00:00Z",
            "result": "Applied"
        },
        {
            "time": "2025-05-01T12:00:00Z",
            "result": "RolledBack",
            "message": "health gate:\n  kubelet not Ready"
        }
    ]
}
`},
		"yaml, no history": {node: "n2", output: "yaml", want: "apiVersion: kubectl-dkc.io/v1alpha1\nentries: []\nkind: NodeConfigHistory\nmetadata:\n  name: n2\n"},
		"jsonpath":         {node: "n1", output: "jsonpath={.entries[*].result}", want: "Applied RolledBack"},
		"name":             {node: "n1", output: "name", want: "nodeconfighistory.kubectl-dkc.io/n1\n"},
		"bad output": {node: "n1", output: "wide",
			wantErr: `invalid --output "wide": must be one of json, yaml, kyaml, name, go-template, go-template-file, template, templatefile, jsonpath, jsonpath-as-json, jsonpath-file`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			streams, _, out, errOut := genericiooptions.NewTestIOStreams()
			o := NewHistoryOptions(streams)
			*o.PrintFlags.OutputFormat = tc.output
			// Complete, but for the client, which the fake replaces.
			if err := o.Complete(genericclioptions.NewConfigFlags(false), &cobra.Command{}, []string{tc.node}); err != nil {
				t.Fatal(err)
			}
			o.Client = fake.NewClientset(withHistory, without)
			err := o.Validate()
			if err == nil {
				err = o.Run(context.Background())
			}
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			checkStreams(t, tc.want, tc.wantErrOut, out, errOut)
		})
	}
}
