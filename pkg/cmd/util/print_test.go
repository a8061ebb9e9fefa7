package util

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestToPrinter(t *testing.T) {
	tests := map[string]struct {
		output, dryRun string
		want           string
	}{
		"default":          {dryRun: DryRunNone, want: "node/n1 assigned\n"},
		"client dry run":   {dryRun: DryRunClient, want: "node/n1 assigned (dry run)\n"},
		"server dry run":   {dryRun: DryRunServer, want: "node/n1 assigned (server dry run)\n"},
		"-o name":          {output: "name", dryRun: DryRunNone, want: "node/n1\n"},
		"-o name, dry run": {output: "name", dryRun: DryRunClient, want: "node/n1\n"},
		"-o jsonpath sets TypeMeta": {
			output: "jsonpath={.kind}/{.apiVersion}/{.metadata.name}", dryRun: DryRunServer, want: "Node/v1/n1",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pf := NewPrintFlags()
			*pf.OutputFormat = tc.output
			p, err := ToPrinter(pf, tc.dryRun, "assigned")
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			// As a clientset returns it: no TypeMeta.
			if err := p.PrintObj(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, &out); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}
