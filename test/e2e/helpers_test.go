package e2e

import (
	"os"
	"testing"

	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// nodeConfig returns n's local kubelet config with edit applied (nil: as
// it is), as YAML: a payload that differs from what n runs only where edit
// says.
func nodeConfig(t testing.TB, n *framework.Node, edit func(cfg map[string]any)) string {
	t.Helper()
	local, err := os.ReadFile(n.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	return framework.ConfigWith(t, local, edit)
}
