package e2e

import (
	"encoding/json"
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

// annotationPatch is a merge patch that sets annotation key of a Node to
// value, or removes it when value is "".
func annotationPatch(t *testing.T, key, value string) []byte {
	t.Helper()
	var v any
	if value != "" {
		v = value
	}
	p, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: v}}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
