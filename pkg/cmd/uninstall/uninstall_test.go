package uninstall

import (
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func TestValidate(t *testing.T) {
	tests := map[string]struct {
		edit    func(o *Options)
		wantErr string
	}{
		"the defaults":             {},
		"--reset-nodes, 2 at once": {edit: func(o *Options) { o.ResetNodes, o.MaxUnavailable = true, "2" }},
		"a percentage":             {edit: func(o *Options) { o.MaxUnavailable = "25%" }},
		"a zero timeout": {
			edit:    func(o *Options) { o.Timeout = 0 },
			wantErr: "invalid --timeout 0s: must be positive",
		},
		"a negative timeout": {
			edit:    func(o *Options) { o.Timeout = -time.Minute },
			wantErr: "invalid --timeout -1m0s: must be positive",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := NewUninstallOptions(genericiooptions.NewTestIOStreamsDiscard())
			if tc.edit != nil {
				tc.edit(o)
			}
			var got string
			if err := o.Validate(); err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Errorf("Validate() = %q, want %q", got, tc.wantErr)
			}
		})
	}
}
