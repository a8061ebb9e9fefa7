package usage

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The sections of cobra's usage template that SetGlobalOptions replaces.
const (
	cobraFlags = `{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}`
	cobraEnd = `{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`
	ownFlags = `{{$own := dkcOwnFlags .}}{{if $own}}

Flags:
{{$own | trimTrailingWhitespaces}}{{end}}`
)

// SetGlobalOptions gives root's command tree kubectl's help for global
// flags: a command's usage lists its own flags only, and ends with one line
// that points at "ROOT options", a command it adds that lists root's
// persistent flags. Call it once the tree is built.
func SetGlobalOptions(root *cobra.Command) {
	tmpl := (&cobra.Command{}).UsageTemplate()
	if !strings.Contains(tmpl, cobraFlags) || !strings.Contains(tmpl, cobraEnd) {
		// A cobra whose template changed: keep its usage, which lists
		// every flag; TestGlobalOptions fails.
		return
	}
	cobra.AddTemplateFunc("dkcOwnFlags", func(c *cobra.Command) string {
		own := pflag.NewFlagSet(c.Name(), pflag.ContinueOnError)
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if c.HasParent() || c.PersistentFlags().Lookup(f.Name) == nil {
				own.AddFlag(f)
			}
		})
		return own.FlagUsages()
	})
	options := OptionsCommand(root)
	tmpl = strings.Replace(tmpl, cobraFlags, ownFlags, 1)
	tmpl = strings.Replace(tmpl, cobraEnd, strings.TrimSuffix(cobraEnd, "{{end}}\n")+"{{else}}\n{{end}}"+
		fmt.Sprintf("\nUse %q for a list of global command-line options (applies to all commands).\n", options.CommandPath()), 1)
	root.SetUsageTemplate(tmpl)
	options.SetUsageTemplate("The following options can be passed to any command:\n\n{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}\n")
}

// OptionsCommand adds to root, once, the command that lists root's
// persistent flags, kubectl's "options".
func OptionsCommand(root *cobra.Command) *cobra.Command {
	for _, c := range root.Commands() {
		if c.Name() == "options" {
			return c
		}
	}
	c := &cobra.Command{
		Use:   "options",
		Short: "Print the list of flags inherited by all commands",
		Long:  "Print the list of flags inherited by all commands.",
		Example: fmt.Sprintf(`  # Print flags inherited by all commands
  %s options`, root.CommandPath()),
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			c.SetOut(c.OutOrStdout())
			return c.Usage()
		},
	}
	root.AddCommand(c)
	return c
}
