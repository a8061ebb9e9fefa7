// Package version implements `kubectl dkc version`.
package version

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util/lifecycle"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/usage"
	"github.com/kubectl-dkc/dkc/pkg/version"
)

// Options holds the flags of `kubectl dkc version`.
type Options struct {
	Output string
	genericiooptions.IOStreams
}

// AddTo gives root a version command and a --version flag, which print the
// same: the one line of Text.
func AddTo(root *cobra.Command, streams genericiooptions.IOStreams) {
	root.AddCommand(NewCmdVersion(streams))
	root.Version = Text()
	root.SetVersionTemplate("{{.Version}}\n")
}

// Text is the version as one line of text: what version and --version
// print, the same in kubectl-dkc and kubectl-dkc-agent, which are built
// together.
func Text() string {
	info := version.Get()
	return fmt.Sprintf("kubectl dkc %s (commit %s, built %s, %s %s)", info.Version, info.GitCommit, info.BuildDate, info.GoVersion, info.Platform)
}

// NewCmdVersion returns the version command.
func NewCmdVersion(streams genericiooptions.IOStreams) *cobra.Command {
	o := &Options{IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of kubectl dkc",
		Example: `  # Print the version
  kubectl dkc version

  # Print the version as JSON, for scripts
  kubectl dkc version -o json`,
		Args: cobra.NoArgs,
		RunE: lifecycle.RunE[any](nil, o),
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", "", "Output format. One of: (json, yaml). Default is one line of text.")
	return cmd
}

// Complete has nothing to fill in: version needs no cluster, nor any of
// kubectl's global flags.
func (o *Options) Complete(any, *cobra.Command, []string) error { return nil }

// Validate checks the flags.
func (o *Options) Validate() error {
	switch o.Output {
	case "", "json", "yaml":
		return nil
	}
	return usage.InvalidOutput(o.Output, []string{"json", "yaml"})
}

// Run prints the version.
func (o *Options) Run(context.Context) error {
	info := version.Get()
	switch o.Output {
	case "json":
		b, err := json.MarshalIndent(info, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(o.Out, string(b))
		return err
	case "yaml":
		b, err := yaml.Marshal(info)
		if err != nil {
			return err
		}
		_, err = o.Out.Write(b)
		return err
	}
	_, err := fmt.Fprintln(o.Out, Text())
	return err
}
