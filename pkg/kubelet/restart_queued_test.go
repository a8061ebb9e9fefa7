package kubelet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Queued runs after systemd accepted the job and before the restarter waits
// for its result; a job systemd refused never calls it.
func TestSystemdRestarterQueued(t *testing.T) {
	tests := map[string]struct {
		units     *fakeUnits
		wantCalls []string
		wantErr   string
	}{
		"job done": {
			units:     &fakeUnits{result: "done"},
			wantCalls: []string{"restart kubelet.service replace", "queued"},
		},
		"job never finishes": {
			units:     &fakeUnits{},
			wantCalls: []string{"restart kubelet.service replace", "queued"},
			wantErr:   "restart unit kubelet.service: job did not finish within 200ms",
		},
		"job refused": {
			units:     &fakeUnits{err: errors.New("Unit kubelet.service not found.")},
			wantCalls: []string{"restart kubelet.service replace"},
			wantErr:   "restart unit kubelet.service: Unit kubelet.service not found.",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := NewSystemdRestarter("kubelet.service", 200*time.Millisecond)
			r.connect = func(context.Context) (unitManager, error) { return tc.units, nil }
			r.Queued = func() {
				tc.units.mu.Lock()
				defer tc.units.mu.Unlock()
				tc.units.calls = append(tc.units.calls, "queued")
			}
			err := r.Restart(context.Background())
			if got := errString(err); got != tc.wantErr {
				t.Errorf("error = %q, want %q", got, tc.wantErr)
			}
			tc.units.mu.Lock()
			defer tc.units.mu.Unlock()
			if diff := cmp.Diff(tc.wantCalls, tc.units.calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}
