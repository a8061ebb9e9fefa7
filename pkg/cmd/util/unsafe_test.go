package util

import (
	"testing"

	"github.com/spf13/cobra"
)

// TestAllowUnsafeFlagAddsUp: --allow-unsafe given twice holds both lists,
// as one comma-separated value does, rather than the last alone.
func TestAllowUnsafeFlagAddsUp(t *testing.T) {
	for args, want := range map[string]struct {
		argv []string
		want string
	}{
		"once":          {[]string{"--allow-unsafe=redirect"}, "redirect"},
		"comma":         {[]string{"--allow-unsafe=resource-managers,redirect"}, "resource-managers,redirect"},
		"repeated":      {[]string{"--allow-unsafe=resource-managers", "--allow-unsafe", "redirect"}, "resource-managers,redirect"},
		"repeated list": {[]string{"--allow-unsafe=security", "--allow-unsafe=resource-managers,redirect"}, "security,resource-managers,redirect"},
		"not given":     {nil, ""},
	} {
		t.Run(args, func(t *testing.T) {
			var value string
			cmd := &cobra.Command{Use: "x"}
			AddAllowUnsafeFlag(cmd, &value)
			if err := cmd.ParseFlags(want.argv); err != nil {
				t.Fatal(err)
			}
			if value != want.want {
				t.Errorf("--allow-unsafe %v: %q, want %q", want.argv, value, want.want)
			}
			if _, err := ParseAllowUnsafe(value); err != nil {
				t.Errorf("ParseAllowUnsafe(%q): %v", value, err)
			}
		})
	}
}
