// Package e2e tests dkc end to end on real components started by
// test/e2e/framework: `make e2e` runs them. The benchmarks are in
// test/bench.
package e2e

import (
	"os"
	"testing"

	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

func TestMain(m *testing.M) {
	os.Exit(framework.RunMain(m))
}
