package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// dkcBinary is the kubectl-dkc under test: $DKC_BINARY (make e2e builds it),
// else built here.
var dkcBinary string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dkcBinary = os.Getenv("DKC_BINARY")
	if dkcBinary == "" {
		dir, err := os.MkdirTemp("", "dkc-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		dkcBinary = filepath.Join(dir, "kubectl-dkc")
		build := exec.Command("go", "build", "-o", dkcBinary, "github.com/kubectl-dkc/dkc")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "build kubectl-dkc: %v\n", err)
			return 1
		}
	}
	before := framework.CaptureHostState()
	code := m.Run()
	// The harness promises to leave the host as it found it.
	if diff := before.Diff(framework.CaptureHostState()); len(diff) > 0 && os.Geteuid() == 0 {
		for _, d := range diff {
			fmt.Fprintf(os.Stderr, "FAIL: host state: %s\n", d)
		}
		return 1
	}
	return code
}
