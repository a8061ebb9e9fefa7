package util

import (
	"fmt"

	"github.com/spf13/cobra"
)

// Dry-run modes, as kubectl names them.
const (
	DryRunNone   = "none"
	DryRunClient = "client"
	DryRunServer = "server"
)

// AddDryRunFlag binds --dry-run as kubectl does: a bare --dry-run means
// client. usage says what each mode does for this command.
func AddDryRunFlag(cmd *cobra.Command, value *string, usage string) {
	cmd.Flags().StringVar(value, "dry-run", *value, usage)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = DryRunClient
	_ = cmd.RegisterFlagCompletionFunc("dry-run", cobra.FixedCompletions([]string{DryRunNone, DryRunClient, DryRunServer}, cobra.ShellCompDirectiveNoFileComp))
}

// ValidateDryRun checks a --dry-run value.
func ValidateDryRun(value string) error {
	switch value {
	case DryRunNone, DryRunClient, DryRunServer:
		return nil
	}
	return fmt.Errorf(`invalid --dry-run %q: must be "none", "client", or "server"`, value)
}
