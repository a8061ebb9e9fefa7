package reset

import (
	"testing"
	"time"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
)

func TestValidate(t *testing.T) {
	tests := map[string]struct {
		opts Options
		want string
	}{
		"valid names":    {opts: Options{Nodes: util.NodeSelection{Names: []string{"n1", "n2"}}, DryRun: util.DryRunNone}},
		"valid selector": {opts: Options{Nodes: util.NodeSelection{Selector: "pool in (a,b)"}, DryRun: util.DryRunServer}},
		"valid wait":     {opts: Options{Nodes: util.NodeSelection{All: true}, DryRun: util.DryRunNone, Wait: true, Timeout: time.Minute}},
		"no nodes": {
			opts: Options{DryRun: util.DryRunNone},
			want: "no nodes given: name them as arguments, or use -l/--selector or --all",
		},
		"bad selector": {
			opts: Options{Nodes: util.NodeSelection{Selector: "a b"}, DryRun: util.DryRunNone},
			want: `invalid --selector "a b": unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt`,
		},
		"bad dry run": {
			opts: Options{Nodes: util.NodeSelection{All: true}, DryRun: "true"},
			want: `invalid --dry-run "true": must be "none", "client", or "server"`,
		},
		"wait with dry run": {
			opts: Options{Nodes: util.NodeSelection{All: true}, DryRun: util.DryRunServer, Wait: true},
			want: "--wait cannot be used with --dry-run: nothing would change to wait for",
		},
		"negative timeout": {
			opts: Options{Nodes: util.NodeSelection{All: true}, DryRun: util.DryRunNone, Timeout: -time.Minute},
			want: "invalid --timeout -1m0s: must not be negative (0 means forever)",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.opts.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Validate() error:\n got: %s\nwant: %s", got, tc.want)
			}
		})
	}
}
