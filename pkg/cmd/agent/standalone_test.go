package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// The standalone agent has every flag of `kubectl dkc agent`, plus the
// connection flags it cannot borrow from kubectl's root command.
func TestStandaloneFlags(t *testing.T) {
	streams := genericiooptions.NewTestIOStreamsDiscard()
	standalone := NewCmdStandalone(streams)
	var missing []string
	NewCmdAgent(&KubeconfigFlags{}, streams).Flags().VisitAll(func(f *pflag.Flag) {
		if standalone.Flags().Lookup(f.Name) == nil {
			missing = append(missing, f.Name)
		}
	})
	if diff := cmp.Diff([]string(nil), missing); diff != "" {
		t.Errorf("flags of `kubectl dkc agent` missing from kubectl-dkc-agent (-want +got):\n%s", diff)
	}
	for _, name := range []string{"kubeconfig", "context", "v"} {
		if standalone.Flags().Lookup(name) == nil {
			t.Errorf("kubectl-dkc-agent has no --%s", name)
		}
	}
}
