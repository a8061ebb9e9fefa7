package generate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// root is the module's root, from this package's directory.
const root = "../../.."

// TestGeneratedFilesAreCurrent regenerates the deepcopy functions and
// deploy/crds.yaml and fails when they differ from what is committed: the
// API types or their markers changed without `make generate`.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	out := t.TempDir()
	if err := Deepcopy(root, out); err != nil {
		t.Fatal(err)
	}
	var generated []string
	err := filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(out, path)
		generated = append(generated, rel)
		want, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		got, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Errorf("%s is not committed: run make generate", rel)
			return nil
		}
		if d := cmp.Diff(string(want), string(got)); d != "" {
			t.Errorf("%s is stale: run make generate (-generated +committed):\n%s", rel, d)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(generated, " "), filepath.Join("pkg", "apis", "dkc", "v1alpha1", "zz_generated.deepcopy.go")) {
		t.Errorf("deepcopy generated %v; want pkg/apis/dkc/v1alpha1/zz_generated.deepcopy.go among them", generated)
	}

	want, err := CRDs(root)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, CRDFile))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("%s is stale: run make generate (-generated +committed):\n%s", CRDFile, d)
	}
}
