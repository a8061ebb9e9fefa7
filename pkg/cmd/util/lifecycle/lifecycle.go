// Package lifecycle runs a command's Options as kubectl runs its own:
// Complete, Validate, Run. It links only cobra, so that the slim
// kubectl-dkc-agent binary shares it with kubectl-dkc.
package lifecycle

import (
	"context"

	"github.com/spf13/cobra"
)

// Options is a verb's Options. F is what Complete reads kubectl's global
// flags from: a genericclioptions.RESTClientGetter for most verbs.
type Options[F any] interface {
	// Complete talks to the outside world: clients, namespace, printers.
	Complete(f F, cmd *cobra.Command, args []string) error
	// Validate checks the flags without I/O; its messages name the flag
	// and the fix.
	Validate() error
	// Run does the work, with the command's context.
	Run(ctx context.Context) error
}

// RunE returns the RunE of a command over o: Complete with f, Validate,
// then Run with the context cobra gives the command. Usage is silenced
// once Validate passed, so that only a usage error points at it.
func RunE[F any](f F, o Options[F]) func(cmd *cobra.Command, args []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(f, cmd, args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		cmd.SilenceUsage = true
		return o.Run(cmd.Context())
	}
}
