package util

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
)

// AddAllowUnsafeFlag adds --allow-unsafe, the assigner's opt-in to safety
// classes an agent refuses otherwise, bound to value.
func AddAllowUnsafeFlag(cmd *cobra.Command, value *string) {
	var refused []string
	for _, c := range kubeletconfig.Classes() {
		if c.RefusedByDefault() {
			refused = append(refused, string(c))
		}
	}
	cmd.Flags().Var(&commaList{value: value}, "allow-unsafe",
		"Comma-separated safety classes whose changes the nodes may apply (a repeated flag adds to them); agents refuse them otherwise: "+strings.Join(refused, ", ")+" (docs/security.md). Recorded in the assignment, beside the digest of the config.")
	_ = cmd.RegisterFlagCompletionFunc("allow-unsafe", cobra.FixedCompletions(refused, cobra.ShellCompDirectiveNoFileComp))
}

// commaList is a comma-separated list flag bound to a string: each use of
// the flag adds to the list, so that --allow-unsafe=a --allow-unsafe=b
// means a,b rather than b alone.
type commaList struct {
	value *string
	set   bool
}

func (l *commaList) String() string { return *l.value }
func (l *commaList) Type() string   { return "string" }

func (l *commaList) Set(v string) error {
	if l.set {
		v = strings.Trim(*l.value+","+v, ",")
	}
	*l.value, l.set = v, true
	return nil
}

// ParseAllowUnsafe parses the value of --allow-unsafe into the class names a
// source.Pin records.
func ParseAllowUnsafe(value string) ([]string, error) {
	classes, err := kubeletconfig.ParseClasses(value)
	if err != nil {
		return nil, fmt.Errorf("invalid --allow-unsafe %q: %w", value, err)
	}
	names := make([]string, len(classes))
	for i, c := range classes {
		names[i] = string(c)
	}
	return names, nil
}
