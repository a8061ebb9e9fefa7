package e2e

import (
	"os"
	"testing"

	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

func TestMain(m *testing.M) {
	os.Exit(framework.RunMain(m))
}
