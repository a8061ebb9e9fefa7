// Command kubectl-dkc-agent is the dkc node agent alone: `kubectl dkc
// agent` without the operator's commands, so that the binary every node
// runs links only what the agent uses (no cli-runtime resource builder, no
// kustomize). The DaemonSet image and the systemd unit run it.
package main

import (
	"fmt"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"

	"github.com/kubectl-dkc/dkc/pkg/cmd/agent"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	err := agent.NewCmdStandalone(streams).Execute()
	klog.Flush()
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}
