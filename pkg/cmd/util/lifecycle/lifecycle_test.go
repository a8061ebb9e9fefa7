package lifecycle

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

type ctxKey struct{}

// fake records the steps RunE takes.
type fake struct {
	steps                      []string
	failComplete, failValidate bool
}

func (o *fake) Complete(f string, _ *cobra.Command, args []string) error {
	o.steps = append(o.steps, "complete "+f+" "+args[0])
	if o.failComplete {
		return errors.New("complete")
	}
	return nil
}

func (o *fake) Validate() error {
	o.steps = append(o.steps, "validate")
	if o.failValidate {
		return errors.New("validate")
	}
	return nil
}

func (o *fake) Run(ctx context.Context) error {
	o.steps = append(o.steps, "run "+ctx.Value(ctxKey{}).(string))
	return nil
}

func TestRunE(t *testing.T) {
	tests := map[string]struct {
		o           fake
		wantSteps   []string
		wantErr     string
		wantSilence bool
	}{
		"all steps, in order": {
			wantSteps: []string{"complete getter NAME", "validate", "run cobra's"}, wantSilence: true,
		},
		"Complete fails": {
			o: fake{failComplete: true}, wantSteps: []string{"complete getter NAME"}, wantErr: "complete",
		},
		"Validate fails: usage not silenced": {
			o: fake{failValidate: true}, wantSteps: []string{"complete getter NAME", "validate"}, wantErr: "validate",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cmd := &cobra.Command{Use: "x"}
			cmd.SetContext(context.WithValue(context.Background(), ctxKey{}, "cobra's"))
			err := RunE[string]("getter", &tc.o)(cmd, []string{"NAME"})
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Errorf("error %q, want %q", gotErr, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantSteps, tc.o.steps); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
			if cmd.SilenceUsage != tc.wantSilence {
				t.Errorf("SilenceUsage = %v, want %v", cmd.SilenceUsage, tc.wantSilence)
			}
		})
	}
}
