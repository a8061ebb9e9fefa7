package rollout

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/rollout/rollouttest"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// rollout start --dry-run reports, per node, what the config changes there
// (util.ReportOptIns, which reads each kubelet's /configz and is tested
// against a configz server there); the fake clientset has no REST client
// to read it with, which the report says for each node. No warning is
// judged from the config alone.
func TestStartDryRunReportsOptIns(t *testing.T) {
	const payload = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: /etc/kubernetes/manifests\n"
	client := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cfg", Labels: map[string]string{source.ConfigLabel: "true"}}, Data: map[string]string{"kubelet": payload}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}},
	)
	streams, _, _, errOut := genericiooptions.NewTestIOStreams()
	o := NewStartOptions(streams)
	o.Config, o.Name, o.Namespace, o.DryRun = "cfg", "r", "kube-system", util.DryRunClient
	o.Nodes.Names = []string{"n1", "n2"}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	o.Client, o.Store = client, rollouttest.NewStore(t, "kube-system")
	var err error
	if o.Printer, err = util.ToPrinter(o.PrintFlags, o.DryRun, "started"); err != nil {
		t.Fatal(err)
	}
	if err := o.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(errOut.String()), "\n") {
		if strings.Contains(line, "allow-unsafe") || strings.Contains(line, "what the config changes") {
			got = append(got, line)
		}
	}
	want := []string{
		"Warning: node/n1: what the config changes there is not known: no REST client to read /configz with",
		"Warning: node/n2: what the config changes there is not known: no REST client to read /configz with",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stderr (-want +got):\n%s\nall of it:\n%s", diff, errOut.String())
	}
}
