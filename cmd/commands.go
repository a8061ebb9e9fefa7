package cmd

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// addCommands adds the verbs that talk to a cluster.
func addCommands(root *cobra.Command, f *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) {
}
