package cmd

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-dkc/dkc/pkg/cmd/agent"
	"github.com/kubectl-dkc/dkc/pkg/cmd/assign"
	"github.com/kubectl-dkc/dkc/pkg/cmd/controller"
	"github.com/kubectl-dkc/dkc/pkg/cmd/diff"
	"github.com/kubectl-dkc/dkc/pkg/cmd/install"
	"github.com/kubectl-dkc/dkc/pkg/cmd/push"
	"github.com/kubectl-dkc/dkc/pkg/cmd/reset"
	"github.com/kubectl-dkc/dkc/pkg/cmd/rollout"
	"github.com/kubectl-dkc/dkc/pkg/cmd/snapshot"
	"github.com/kubectl-dkc/dkc/pkg/cmd/status"
	"github.com/kubectl-dkc/dkc/pkg/cmd/uninstall"
)

// addCommands adds the verbs that talk to a cluster.
func addCommands(root *cobra.Command, f *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) {
	root.AddCommand(assign.NewCmdAssign(f, streams))
	root.AddCommand(status.NewCmdStatus(f, streams))
	root.AddCommand(reset.NewCmdReset(f, streams))
	root.AddCommand(snapshot.NewCmdSnapshot(f, streams))
	root.AddCommand(push.NewCmdPush(f, streams))
	root.AddCommand(diff.NewCmdDiff(f, streams))
	root.AddCommand(agent.NewCmdAgent(f, streams))
	root.AddCommand(rollout.NewCmdRollout(f, streams))
	root.AddCommand(controller.NewCmdController(f, streams))
	root.AddCommand(install.NewCmdInstall(f, streams))
	root.AddCommand(uninstall.NewCmdUninstall(f, streams))
}
