package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// result is one run of the kubectl-dkc binary.
type result struct {
	Stdout, Stderr string
	ExitCode       int
}

// dkc runs the kubectl-dkc binary under test against c, with stdin.
func dkc(t *testing.T, c *framework.Cluster, stdin string, args ...string) result {
	t.Helper()
	return dkcAs(t, c.Kubeconfig, stdin, args...)
}

// dkcAs runs the kubectl-dkc binary with KUBECONFIG set to kubeconfig, for
// other users than the admin.
func dkcAs(t *testing.T, kubeconfig, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(framework.DKCBinary(), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := result{Stdout: out.String(), Stderr: errOut.String()}
	if exitErr, ok := err.(*exec.ExitError); ok {
		r.ExitCode = exitErr.ExitCode()
	} else if err != nil {
		t.Fatalf("run kubectl-dkc %v: %v", args, err)
	}
	t.Logf("$ kubectl dkc %s\n%s%s(exit %d)", strings.Join(args, " "), r.Stdout, r.Stderr, r.ExitCode)
	return r
}

// readDKC is dkc for a command that reads a state (status, rollout
// status): it fails the test unless the command printed the state. A state
// that is a failure exits non-zero after printing it: 2 for a node's error
// or a halted rollout, 1 for an aborted one (docs/user-guide.md#exit-codes).
func readDKC(t *testing.T, c *framework.Cluster, args ...string) result {
	t.Helper()
	r := dkc(t, c, "", args...)
	if r.ExitCode != 0 && (r.Stdout == "" || r.ExitCode > 2) {
		t.Fatalf("kubectl dkc %s: exit %d: %s", strings.Join(args, " "), r.ExitCode, r.Stderr)
	}
	return r
}

// mustDKC is dkc that fails the test unless the command exits 0.
func mustDKC(t *testing.T, c *framework.Cluster, stdin string, args ...string) result {
	t.Helper()
	r := dkc(t, c, stdin, args...)
	if r.ExitCode != 0 {
		t.Fatalf("kubectl dkc %s: exit %d: %s", strings.Join(args, " "), r.ExitCode, r.Stderr)
	}
	return r
}
