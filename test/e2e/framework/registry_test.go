package framework

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestRegistryVersionPinned checks that DefaultRegistryBinary looks where
// hack/build-components-registry.sh puts the registry: under the version
// hack/tools-registry/go.mod pins.
func TestRegistryVersionPinned(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "hack", "tools-registry", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^require github\.com/distribution/distribution/v3 (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("hack/tools-registry/go.mod requires no github.com/distribution/distribution/v3")
	}
	if got := string(m[1]); got != registryVersion {
		t.Errorf("hack/tools-registry/go.mod pins distribution %s, framework.registryVersion is %s", got, registryVersion)
	}
}
