// Package bench holds dkc's benchmarks, on real components started by
// test/e2e/framework as the e2e tests start them: `make bench` runs them
// (docs/performance.md has what each measures and the figures). Helpers
// shared with the e2e tests live in the framework, not here.
package bench

import (
	"os"
	"testing"

	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

func TestMain(m *testing.M) {
	os.Exit(framework.RunMain(m))
}
