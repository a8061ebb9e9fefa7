// Package cmd is the root of the kubectl dkc command tree.
package cmd

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/usage"
	"github.com/kubectl-dkc/dkc/pkg/cmd/version"
)

// NewCmdDKC returns the root command with every subcommand and every kubectl
// global flag (--kubeconfig, --context, -n, ...).
func NewCmdDKC(streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		// The binary's name, which kubectl runs for "kubectl dkc" and the
		// completion scripts complete; the help reads "kubectl dkc".
		Use:   "kubectl-dkc",
		Short: "Dynamic Kubelet Configuration, out of tree",
		Long: `kubectl dkc reconfigures live kubelets through the Kubernetes API: put a
KubeletConfiguration in a ConfigMap, point nodes at it, and the dkc agent on
each node applies it, checks its health and falls back if it is bad. It
replaces Dynamic Kubelet Configuration. Guide: docs/user-guide.md.`,
		Example: `  # The whole workflow
  kubectl dkc snapshot node-1 > kubelet.json
  kubectl dkc push kubelet.json --name my-node-config
  kubectl dkc assign node-1 --config my-node-config-5fd8t4bhgb --wait`,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl dkc",
		},
	}

	configFlags := genericclioptions.NewConfigFlags(true)
	configFlags.AddFlags(cmd.PersistentFlags())

	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	cmd.PersistentFlags().AddGoFlag(klogFlags.Lookup("v"))

	version.AddTo(cmd, streams)
	addCommands(cmd, configFlags, streams)
	usage.SetGlobalOptions(cmd)
	usage.Set(cmd)
	setCompletionHelp(cmd)
	return cmd
}

// PluginCompletionSetup are the commands that put kubectl_complete-dkc on
// the PATH of a krew install, where kubectl (1.26+) looks for it to
// complete "kubectl dkc". krew links only a plugin's one bin
// (kubectl-dkc) into its bin directory; it unpacks the helper in the
// archive beside it, off the PATH (kubernetes-sigs/krew#812).
const PluginCompletionSetup = `  printf '#!/usr/bin/env sh\nexec kubectl-dkc __complete "$@"\n' >"${KREW_ROOT:-$HOME/.krew}/bin/kubectl_complete-dkc"
  chmod +x "${KREW_ROOT:-$HOME/.krew}/bin/kubectl_complete-dkc"`

// setCompletionHelp says in completion --help how "kubectl dkc <TAB>"
// completes, and what a krew install needs for it.
func setCompletionHelp(root *cobra.Command) {
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		c.Long = `Generate the completion script of kubectl-dkc for a shell.

"kubectl dkc <TAB>" is completed by kubectl (1.26 and later), once its own
completion is loaded (source <(kubectl completion bash)): it runs the
executable kubectl_complete-dkc from your PATH, which asks kubectl-dkc.
make install and the release archive put it next to kubectl-dkc. After
"kubectl krew install", which links only kubectl-dkc onto your PATH, run
once:

` + PluginCompletionSetup + `

To complete the binary itself, "kubectl-dkc <TAB>", load the script of your
shell: see "kubectl dkc completion SHELL --help".`
	}
}

// Execute runs the root command and returns the process exit code. Errors
// are printed as "error: ..." on stderr; a usage error (unknown command or
// flag, wrong arguments) adds a line that points at the command's --help,
// and exits 1.
func Execute() int {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	// Print the apiserver's warnings as kubectl does: "Warning: ...", once each.
	rest.SetDefaultWarningHandler(rest.NewWarningWriter(streams.ErrOut, rest.WarningWriterOptions{Deduplicate: true}))
	err := NewCmdDKC(streams).Execute()
	if err != nil && !util.Silent(err) {
		fmt.Fprintf(streams.ErrOut, "error: %v\n", err)
		if hint := ConnectionHint(err); hint != "" {
			fmt.Fprintln(streams.ErrOut, hint)
		}
	}
	klog.Flush()
	return util.ExitCode(err)
}

// ConnectionHint is kubectl's hint for an error that says the apiserver
// refused the connection, or "" for any other error. (Some errors reach
// here as text only, without the syscall error: their message is read.)
func ConnectionHint(err error) string {
	if !utilnet.IsConnectionRefused(err) && !strings.Contains(err.Error(), "connect: connection refused") {
		return ""
	}
	server := "you named"
	var uerr *url.Error
	if errors.As(err, &uerr) {
		if u, perr := url.Parse(uerr.URL); perr == nil && u.Host != "" {
			server = u.Host
		}
	} else if m := requestURL.FindStringSubmatch(err.Error()); m != nil {
		server = m[1]
	}
	return fmt.Sprintf("The connection to the server %s was refused - did you specify the right host or port?", server)
}

// requestURL is the server of a request as a *url.Error prints it:
// Get "https://HOST/...".
var requestURL = regexp.MustCompile(`[A-Z]+ "https?://([^/"]+)`)
