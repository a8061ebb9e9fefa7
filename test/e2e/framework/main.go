package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// dkcBinary is the kubectl-dkc under test, set by RunMain.
var dkcBinary string

// RunMain runs the tests and benchmarks of a package that uses the
// framework, as its TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(framework.RunMain(m)) }
//
// It makes the kubectl-dkc under test (DKCBinary) once for the test binary,
// and, when run as root, fails the run if the host's state (HostState) is
// not as it found it. It returns the exit code.
func RunMain(m *testing.M) int {
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
	before := CaptureHostState()
	code := m.Run()
	// The harness promises to leave the host as it found it.
	if diff := before.Diff(CaptureHostState()); len(diff) > 0 && os.Geteuid() == 0 {
		for _, d := range diff {
			fmt.Fprintf(os.Stderr, "FAIL: host state: %s\n", d)
		}
		return 1
	}
	return code
}

// DKCBinary is the kubectl-dkc under test: $DKC_BINARY (make e2e and make
// bench build it), else the one RunMain built for this test binary. It
// panics in a package whose TestMain does not call RunMain.
func DKCBinary() string {
	if dkcBinary == "" {
		panic("framework.DKCBinary: the package's TestMain does not call framework.RunMain")
	}
	return dkcBinary
}

// AgentBinary is the slim kubectl-dkc-agent: $DKC_AGENT_BINARY (make e2e and
// make bench build it), else built in tb's temporary directory as make
// agent builds it.
func AgentBinary(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("DKC_AGENT_BINARY"); p != "" {
		return p
	}
	p := filepath.Join(tb.TempDir(), "kubectl-dkc-agent")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", p, "github.com/kubectl-dkc/dkc/cmd/kubectl-dkc-agent")
	if out, err := build.CombinedOutput(); err != nil {
		tb.Fatalf("build kubectl-dkc-agent: %v\n%s", err, out)
	}
	return p
}
