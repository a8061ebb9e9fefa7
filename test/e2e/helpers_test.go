package e2e

import (
	"os"
	"testing"

	"sigs.k8s.io/yaml"

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
	return configWith(t, local, edit)
}

// configWith returns the kubelet config local with edit applied, as YAML.
func configWith(t testing.TB, local []byte, edit func(cfg map[string]any)) string {
	t.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal(local, &cfg); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(cfg)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
