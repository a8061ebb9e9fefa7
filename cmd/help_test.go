package cmd_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-dkc/dkc/cmd"
)

// globalOptionsLine is the line that stands for kubectl's global flags in
// every command's help, as in kubectl's.
const globalOptionsLine = `Use "kubectl dkc options" for a list of global command-line options (applies to all commands).`

// TestGlobalOptions: a command's help lists its own flags and points at
// `kubectl dkc options` for the global ones, which that command lists.
func TestGlobalOptions(t *testing.T) {
	walk(cmd.NewCmdDKC(genericiooptions.NewTestIOStreamsDiscard()), func(c *cobra.Command) {
		path := strings.Fields(c.CommandPath())[2:]
		if len(path) > 0 && path[0] == "options" {
			return
		}
		help := helpOf(t, c)
		if !strings.HasSuffix(help, "\n"+globalOptionsLine+"\n") {
			t.Errorf("%s --help does not end with %q:\n%s", c.CommandPath(), globalOptionsLine, help)
		}
		for _, global := range []string{"--kubeconfig", "--context", "--namespace", "Global Flags"} {
			if strings.Contains(help, global) {
				t.Errorf("%s --help lists %s:\n%s", c.CommandPath(), global, help)
			}
		}
	})

	var out bytes.Buffer
	root := cmd.NewCmdDKC(genericiooptions.IOStreams{Out: &out, ErrOut: &out})
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"options"})
	if err := root.Execute(); err != nil {
		t.Fatalf("options: %v", err)
	}
	for _, global := range []string{"--kubeconfig string", "-n, --namespace string", "--context string", "-v, --v Level"} {
		if !strings.Contains(out.String(), global) {
			t.Errorf("options does not list %s:\n%s", global, out.String())
		}
	}
	if strings.Contains(out.String(), "--help") {
		t.Errorf("options lists its own --help:\n%s", out.String())
	}
}

// TestExamplesParse: every line of a command's Example that runs kubectl
// dkc names a command of the tree whose flags and arguments it accepts,
// and, run against a closed port, passes its own checks: it fails only at
// its first API call, or on a file the example assumes.
func TestExamplesParse(t *testing.T) {
	n := 0
	walk(cmd.NewCmdDKC(genericiooptions.NewTestIOStreamsDiscard()), func(c *cobra.Command) {
		// A line that ends in \ goes on on the next.
		for _, line := range strings.Split(strings.ReplaceAll(c.Example, "\\\n", " "), "\n") {
			line = strings.TrimSpace(line)
			for _, part := range strings.Split(line, "$(") {
				i := strings.Index(part, "kubectl dkc ")
				if i < 0 || strings.TrimSpace(part[:i]) != "" && !strings.HasSuffix(strings.TrimSpace(part[:i]), "=") {
					continue
				}
				n++
				words := shellWords(part[i+len("kubectl dkc "):])
				if err := parses(words); err != nil {
					t.Errorf("%s --help: example %q: %v", c.CommandPath(), line, err)
					continue
				}
				// Run, it passes its checks: it ends well, or at its first
				// API call (the kubeconfig names a closed port) or file.
				if words[0] == "agent" || words[0] == "controller" || words[0] == "completion" {
					continue // they run until stopped
				}
				if strings.Contains(part, "$") {
					continue // a value the shell fills in
				}
				r := runBinary(t, dkcBinary, words...)
				if r.Code != 0 && !strings.Contains(r.Stderr, "was refused") && !strings.Contains(r.Stderr, "no such file or directory") {
					t.Errorf("%s --help: example %q: exit %d:\n%s", c.CommandPath(), line, r.Code, r.Stderr)
				}
			}
		}
	})
	if n < 30 {
		t.Errorf("found %d example lines, want the examples of every command", n)
	}
}

// parses parses args as kubectl dkc would, in a fresh command tree: the
// command, its flags, its arguments and its required flags, without running
// it.
func parses(args []string) error {
	root := cmd.NewCmdDKC(genericiooptions.NewTestIOStreamsDiscard())
	c, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if err := c.ParseFlags(rest); err != nil {
		return err
	}
	if err := c.ValidateArgs(c.Flags().Args()); err != nil {
		return err
	}
	if err := c.ValidateRequiredFlags(); err != nil {
		return err
	}
	return c.ValidateFlagGroups()
}

// shellWords splits a command line as a shell would, up to its first
// unquoted |, >, <, ;, & or ) (where another command starts). Quotes are
// removed; $VARIABLES and $(...) stay as they are written.
func shellWords(line string) []string {
	var words []string
	var word strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				word.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case strings.ContainsRune("|><;&)#", r):
			if inWord {
				words = append(words, word.String())
			}
			return words
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words
}

// TestConnectionRefusedHint: a command whose apiserver refuses the
// connection ends with kubectl's hint, once; a usage error has none.
func TestConnectionRefusedHint(t *testing.T) {
	const hint = "The connection to the server 127.0.0.1:1 was refused - did you specify the right host or port?"
	r := runBinary(t, dkcBinary, "status")
	if r.Code != 1 || !strings.HasSuffix(r.Stderr, "\n"+hint+"\n") || strings.Count(r.Stderr, hint) != 1 {
		t.Errorf("status against a closed port: exit %d, stderr:\n%s\nwant exit 1 and the hint %q", r.Code, r.Stderr, hint)
	}
	if r := runBinary(t, dkcBinary, "status", "--no-such-flag"); strings.Contains(r.Stderr, "The connection to the server") {
		t.Errorf("a usage error got the hint:\n%s", r.Stderr)
	}
}

// TestInvalidOutput: every command with -o refuses a format it does not
// print in one wording, naming the formats it does.
func TestInvalidOutput(t *testing.T) {
	for _, args := range [][]string{
		{"assign", "n1", "--config", "c"},
		{"push", "f.yaml", "--name", "c"},
		{"status"},
		{"reset", "n1"},
		{"snapshot", "n1"},
		{"version"},
		{"rollout", "status"},
		{"rollout", "list"},
		{"rollout", "history", "n1"},
	} {
		r := runBinary(t, dkcBinary, append(args, "-o", "bogus")...)
		const want = `error: invalid --output "bogus": must be one of `
		if r.Code != 1 || !strings.HasPrefix(r.Stderr, want) {
			t.Errorf("%s -o bogus: exit %d, stderr:\n%s\nwant exit 1 and %q...", strings.Join(args, " "), r.Code, r.Stderr, want)
		}
	}
}

// maxHelpLines is a screen: every command's --help fits on one. Depth
// lives in docs/, which the help points at.
const maxHelpLines = 40

// TestHelpFitsOnAScreen: no command's --help is longer than a screen, the
// slim agent binary's included.
func TestHelpFitsOnAScreen(t *testing.T) {
	walk(cmd.NewCmdDKC(genericiooptions.NewTestIOStreamsDiscard()), func(c *cobra.Command) {
		if n := strings.Count(helpOf(t, c), "\n"); n > maxHelpLines {
			t.Errorf("%s --help has %d lines, more than a screen (%d): move the depth to docs/", c.CommandPath(), n, maxHelpLines)
		}
	})
	r := runBinary(t, agentBinary, "--help")
	if r.Code != 0 {
		t.Fatalf("kubectl-dkc-agent --help: exit %d:\n%s", r.Code, r.Stderr)
	}
	if n := strings.Count(r.Stdout, "\n"); n > maxHelpLines {
		t.Errorf("kubectl-dkc-agent --help has %d lines, more than a screen (%d): move the depth to docs/", n, maxHelpLines)
	}
}

// helpOf returns what c's --help prints, run in a fresh command tree.
func helpOf(t *testing.T, c *cobra.Command) string {
	t.Helper()
	var out bytes.Buffer
	root := cmd.NewCmdDKC(genericiooptions.IOStreams{Out: &out, ErrOut: &out})
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append(strings.Fields(c.CommandPath())[2:], "--help"))
	if err := root.Execute(); err != nil {
		t.Fatalf("%s --help: %v", c.CommandPath(), err)
	}
	return out.String()
}
