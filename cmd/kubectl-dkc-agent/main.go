// Command kubectl-dkc-agent is the dkc node agent alone: `kubectl dkc
// agent` without the operator's commands, so that the binary every node
// runs links only what the agent uses (no cli-runtime resource builder, no
// kustomize). The DaemonSet image and the systemd unit run it.
package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"

	"github.com/kubectl-dkc/dkc/pkg/cmd/agent"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/usage"
)

// gcPercent is the agent's GOGC unless $GOGC sets one. The idle agent's
// live heap is about 3 MB and it allocates little, so Go's default of 100
// (collect when the heap doubles) mostly keeps garbage resident: 50 takes
// about 2 MiB off its idle RSS on every node, and its idle CPU stays about
// zero (BenchmarkAgentIdle, docs/performance.md).
const gcPercent = 50

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	cmd := agent.NewCmdStandalone(streams)
	usage.Set(cmd)
	err := cmd.Execute()
	klog.Flush()
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}
