// Package usage gives a cobra command tree kubectl's manners with usage
// errors. It links only cobra, so that the slim kubectl-dkc-agent binary
// shares it with kubectl-dkc.
package usage

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// Error is a mistake in how a command was called: an unknown command or
// flag, a bad flag value, the wrong number of arguments. It prints as
// kubectl prints one: the message, then a line that points at the
// command's help, instead of the whole usage.
type Error struct {
	// CommandPath is the command that was called: "kubectl dkc rollout".
	CommandPath string
	Err         error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%v\nSee '%s --help' for usage.", e.Err, e.CommandPath)
}

func (e *Error) Unwrap() error { return e.Err }

// InvalidOutput is the error of every command for a -o format it does not
// print: the format, and the formats it does (allowed). (util.Printer
// returns it for cli-runtime's printers.)
func InvalidOutput(format string, allowed []string) error {
	return fmt.Errorf("invalid --output %q: must be one of %s", format, strings.Join(allowed, ", "))
}

// Errorf returns an Error of cmd with the formatted message.
func Errorf(cmd *cobra.Command, format string, args ...any) error {
	return &Error{CommandPath: cmd.CommandPath(), Err: fmt.Errorf(format, args...)}
}

// Set gives root's command tree kubectl's manners with usage errors: an
// unknown command of any command group, an unknown flag, a bad flag value
// or a wrong number of arguments makes the command fail with an Error
// (exit 1), with cobra's "Did you mean this?" suggestions for a mistyped
// command, and the usage is never printed in full. A group called alone
// prints its help. Call it once the tree is built.
func Set(root *cobra.Command) {
	root.SilenceUsage = true
	root.SilenceErrors = true
	// Add cobra's own groups now, so that they are covered too.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &Error{CommandPath: c.CommandPath(), Err: err}
	})
	set(root)
}

func set(c *cobra.Command) {
	switch {
	case c.HasSubCommands():
		// Without Run, cobra prints the help of a group for any argument
		// and succeeds: a mistyped command would exit 0.
		c.Args = unknownCommand
		if !c.Runnable() {
			c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
		}
	case c.Args != nil:
		args := c.Args
		c.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				return &Error{CommandPath: c.CommandPath(), Err: err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		set(sub)
	}
}

// unknownCommand refuses any argument of a command group as an unknown
// command, with the group's commands that look like it.
func unknownCommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	return Errorf(c, "unknown command %q for %q%s", args[0], c.CommandPath(), suggestions(c, args[0]))
}

// suggestions are cobra's "Did you mean this?" lines for typed, as cobra
// prints them for its root command, or nothing.
func suggestions(c *cobra.Command, typed string) string {
	if c.DisableSuggestions {
		return ""
	}
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	names := c.SuggestionsFor(typed)
	if len(names) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n\nDid you mean this?\n")
	for _, n := range names {
		fmt.Fprintf(&b, "\t%s\n", n)
	}
	return b.String()
}
