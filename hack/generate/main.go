// Command generate writes what is made from the API types of pkg/apis: each
// API package's zz_generated.deepcopy.go and deploy/crds.yaml (package
// pkg/apis/generate). Run it from the module's root: make generate.
package main

import (
	"fmt"
	"os"

	"github.com/kubectl-dkc/dkc/pkg/apis/generate"
)

func main() {
	if err := gen(); err != nil {
		fmt.Fprintln(os.Stderr, "generate:", err)
		os.Exit(1)
	}
}

func gen() error {
	if err := generate.Deepcopy(".", ""); err != nil {
		return err
	}
	crds, err := generate.CRDs(".")
	if err != nil {
		return err
	}
	return os.WriteFile(generate.CRDFile, crds, 0o644)
}
