package cmd_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The binaries under test, built by TestMain.
var dkcBinary, agentBinary string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "dkc-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	dkcBinary = filepath.Join(dir, "kubectl-dkc")
	agentBinary = filepath.Join(dir, "kubectl-dkc-agent")
	for bin, pkg := range map[string]string{
		dkcBinary:   "github.com/kubectl-dkc/dkc",
		agentBinary: "github.com/kubectl-dkc/dkc/cmd/kubectl-dkc-agent",
	} {
		out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "go build %s: %v\n%s", pkg, err, out)
			return 1
		}
	}
	return m.Run()
}

// result is what a run of a binary left.
type result struct {
	Code           int
	Stdout, Stderr string
}

// runBinary runs bin with args, with a HOME and a kubeconfig of its own:
// the kubeconfig names a cluster at a closed loopback port, and every case
// fails before any API call.
func runBinary(t *testing.T, bin string, args ...string) result {
	t.Helper()
	return runWith(t, runEnv{}, bin, args...)
}

// runEnv is where runWith runs a binary.
type runEnv struct {
	// Kubeconfig is the kubeconfig's path; empty for one that names a
	// cluster at a closed loopback port.
	Kubeconfig string
	// Dir is the working directory; empty for the test's.
	Dir string
	// Stdin is what the binary reads on stdin.
	Stdin string
}

// runWith runs bin with args in env, with a HOME of its own.
func runWith(t *testing.T, env runEnv, bin string, args ...string) result {
	t.Helper()
	home := t.TempDir()
	kubeconfig := env.Kubeconfig
	if kubeconfig == "" {
		kubeconfig = filepath.Join(home, "kubeconfig")
		const config = `apiVersion: v1
kind: Config
clusters:
- name: none
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: none
  context:
    cluster: none
current-context: none
`
		if err := os.WriteFile(kubeconfig, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"HOME=" + home, "KUBECONFIG=" + kubeconfig, "PATH=" + os.Getenv("PATH")}
	cmd.Dir = env.Dir
	cmd.Stdin = strings.NewReader(env.Stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("run %s %s: %v", filepath.Base(bin), strings.Join(args, " "), err)
	}
	return result{Code: cmd.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stderr.String()}
}

// TestUsageErrors: a mistyped command or flag, or the wrong arguments, fail
// with kubectl's two lines on stderr (cobra's suggestions between them),
// not the whole usage; a flag that would do nothing, or a rollout command
// that was not told which rollout, fails with the error alone.
func TestUsageErrors(t *testing.T) {
	tests := map[string]struct {
		bin  *string
		args []string
		want string
	}{
		"unknown command": {
			bin: &dkcBinary, args: []string{"abrot"},
			want: "error: unknown command \"abrot\" for \"kubectl dkc\"\n" +
				"See 'kubectl dkc --help' for usage.\n",
		},
		"mistyped command": {
			bin: &dkcBinary, args: []string{"rollut"},
			want: "error: unknown command \"rollut\" for \"kubectl dkc\"\n" +
				"\nDid you mean this?\n\trollout\n\n" +
				"See 'kubectl dkc --help' for usage.\n",
		},
		"mistyped rollout command": {
			bin: &dkcBinary, args: []string{"rollout", "abrot"},
			want: "error: unknown command \"abrot\" for \"kubectl dkc rollout\"\n" +
				"\nDid you mean this?\n\tabort\n\n" +
				"See 'kubectl dkc rollout --help' for usage.\n",
		},
		"unknown command of completion": {
			bin: &dkcBinary, args: []string{"completion", "tcsh"},
			want: "error: unknown command \"tcsh\" for \"kubectl dkc completion\"\n" +
				"\nDid you mean this?\n\tbash\n\tfish\n\tzsh\n\n" +
				"See 'kubectl dkc completion --help' for usage.\n",
		},
		"unknown flag of a group": {
			bin: &dkcBinary, args: []string{"rollout", "--frobnicate"},
			want: "error: unknown flag: --frobnicate\n" +
				"See 'kubectl dkc rollout --help' for usage.\n",
		},
		"unknown flag of a command": {
			bin: &dkcBinary, args: []string{"rollout", "abort", "r1", "--frobnicate"},
			want: "error: unknown flag: --frobnicate\n" +
				"See 'kubectl dkc rollout abort --help' for usage.\n",
		},
		"bad flag value": {
			bin: &dkcBinary, args: []string{"assign", "n1", "--config", "c", "--wait", "--timeout", "soon"},
			want: "error: invalid argument \"soon\" for \"--timeout\" flag: time: invalid duration \"soon\"\n" +
				"See 'kubectl dkc assign --help' for usage.\n",
		},
		"too many arguments": {
			bin: &dkcBinary, args: []string{"rollout", "pause", "r1", "r2"},
			want: "error: accepts at most 1 arg(s), received 2\n" +
				"See 'kubectl dkc rollout pause --help' for usage.\n",
		},
		"agent: unknown command": {
			bin: &agentBinary, args: []string{"abrot"},
			want: "error: unknown command \"abrot\" for \"kubectl-dkc-agent\"\n" +
				"See 'kubectl-dkc-agent --help' for usage.\n",
		},
		"agent: unknown flag": {
			bin: &agentBinary, args: []string{"--frobnicate"},
			want: "error: unknown flag: --frobnicate\n" +
				"See 'kubectl-dkc-agent --help' for usage.\n",
		},
		"assign --timeout without --wait": {
			bin: &dkcBinary, args: []string{"assign", "n1", "--config", "c", "--timeout", "1m"},
			want: "error: --timeout has no effect without --wait: add --wait, or drop --timeout\n",
		},
		"reset --timeout without --wait": {
			bin: &dkcBinary, args: []string{"reset", "n1", "--timeout", "1m"},
			want: "error: --timeout has no effect without --wait: add --wait, or drop --timeout\n",
		},
		"rollout start --timeout without --wait": {
			bin: &dkcBinary, args: []string{"rollout", "start", "--all", "--config", "c", "--timeout", "0"},
			want: "error: --timeout has no effect without --wait: add --wait, or drop --timeout\n",
		},
		"rollout undo --timeout without --wait": {
			bin: &dkcBinary, args: []string{"rollout", "undo", "r1", "--timeout", "1m"},
			want: "error: --timeout has no effect without --wait: add --wait, or drop --timeout\n",
		},
		"rollout abort without NAME": {
			bin: &dkcBinary, args: []string{"rollout", "abort"},
			want: "error: name the rollout (kubectl get nodeconfigrollouts -n kube-system lists them), or pass --latest to act on the newest\n",
		},
		"rollout pause without NAME": {
			bin: &dkcBinary, args: []string{"rollout", "pause", "-n", "ops"},
			want: "error: name the rollout (kubectl get nodeconfigrollouts -n ops lists them), or pass --latest to act on the newest\n",
		},
		"rollout undo without NAME": {
			bin: &dkcBinary, args: []string{"rollout", "undo", "--wait"},
			want: "error: name the rollout (kubectl get nodeconfigrollouts -n kube-system lists them), or pass --latest to act on the newest\n",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			want := result{Code: 1, Stderr: tc.want}
			if diff := cmp.Diff(want, runBinary(t, *tc.bin, tc.args...)); diff != "" {
				t.Errorf("%s %s (-want +got):\n%s", filepath.Base(*tc.bin), strings.Join(tc.args, " "), diff)
			}
		})
	}
}

// TestGroupAlone: a command group called alone prints its help and
// succeeds, as cobra's groups do.
func TestGroupAlone(t *testing.T) {
	got := runBinary(t, dkcBinary, "rollout")
	if got.Code != 0 || got.Stderr != "" || !strings.Contains(got.Stdout, "kubectl dkc rollout [command]") {
		t.Errorf("kubectl-dkc rollout: exit %d, stderr %q, stdout:\n%s", got.Code, got.Stderr, got.Stdout)
	}
}

// TestVersion: both binaries answer version and --version with the same
// line, as they are built together.
func TestVersion(t *testing.T) {
	want := runBinary(t, dkcBinary, "version")
	if want.Code != 0 || want.Stderr != "" || !strings.HasPrefix(want.Stdout, "kubectl dkc v") || strings.Count(want.Stdout, "\n") != 1 {
		t.Fatalf("kubectl-dkc version: %+v", want)
	}
	for _, c := range []struct {
		bin  string
		args []string
	}{
		{dkcBinary, []string{"--version"}},
		{agentBinary, []string{"version"}},
		{agentBinary, []string{"--version"}},
	} {
		if diff := cmp.Diff(want, runBinary(t, c.bin, c.args...)); diff != "" {
			t.Errorf("%s %s (-want +got):\n%s", filepath.Base(c.bin), strings.Join(c.args, " "), diff)
		}
	}
}

// TestCompletionScript: the completion scripts complete the binary,
// kubectl-dkc (kubectl dkc <TAB> goes through kubectl_complete-dkc).
func TestCompletionScript(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "complete -o default -F __start_kubectl-dkc kubectl-dkc",
		"zsh":  "compdef _kubectl-dkc kubectl-dkc",
		"fish": "complete -c kubectl-dkc ",
	} {
		got := runBinary(t, dkcBinary, "completion", shell)
		if got.Code != 0 || got.Stderr != "" || !strings.Contains(got.Stdout, want) {
			t.Errorf("kubectl-dkc completion %s: exit %d, stderr %q, no %q in the script", shell, got.Code, got.Stderr, want)
		}
		if strings.Contains(got.Stdout, " dkc\n") {
			t.Errorf("kubectl-dkc completion %s completes a command dkc", shell)
		}
	}
	got := runBinary(t, dkcBinary, "__complete", "rollout", "ab")
	if got.Code != 0 || !strings.HasPrefix(got.Stdout, "abort\t") {
		t.Errorf("kubectl-dkc __complete rollout ab: exit %d, stdout:\n%s", got.Code, got.Stdout)
	}
}

// TestPluginCompletion: "kubectl dkc <TAB>" goes through
// kubectl_complete-dkc on the PATH. The helper shipped in the repository
// and the one that completion --help's commands write into a krew install
// (krew links only kubectl-dkc) both answer kubectl's __complete request
// through kubectl-dkc.
func TestPluginCompletion(t *testing.T) {
	help := runBinary(t, dkcBinary, "completion", "--help")
	var setup []string
	for _, line := range strings.Split(help.Stdout, "\n") {
		if strings.Contains(line, "KREW_ROOT") {
			setup = append(setup, strings.TrimSpace(line))
		}
	}
	if len(setup) != 2 {
		t.Fatalf("completion --help: want the two commands that set up completion after a krew install, got %q in:\n%s", setup, help.Stdout)
	}
	krewRoot := t.TempDir()
	if err := os.Mkdir(filepath.Join(krewRoot, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	sh := exec.Command("/bin/sh", "-ec", strings.Join(setup, "\n"))
	sh.Env = []string{"HOME=" + t.TempDir(), "KREW_ROOT=" + krewRoot, "PATH=/usr/bin:/bin"}
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("the commands of completion --help: %v\n%s", err, out)
	}
	repo, err := filepath.Abs("../kubectl_complete-dkc")
	if err != nil {
		t.Fatal(err)
	}
	for _, helper := range []string{repo, filepath.Join(krewRoot, "bin", "kubectl_complete-dkc")} {
		// kubectl runs the helper with the words after "kubectl dkc".
		c := exec.Command(helper, "rollout", "ab")
		c.Env = []string{"HOME=" + t.TempDir(), "PATH=" + filepath.Dir(dkcBinary) + ":/usr/bin:/bin"}
		out, err := c.Output()
		if err != nil || !strings.HasPrefix(string(out), "abort\t") || !strings.Contains(string(out), "\n:4\n") {
			t.Errorf("%s rollout ab: %v, stdout:\n%s\nwant abort and cobra's directive :4", helper, err, out)
		}
	}
}
