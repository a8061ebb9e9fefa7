package lease

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
)

// TestElectionRefusesAWeakFence: the Lease stores whole seconds, so a
// duration that is not, or that does not outlast the renew deadline, would
// let another client take over before the holder stops.
func TestElectionRefusesAWeakFence(t *testing.T) {
	for name, tc := range map[string]struct {
		duration, deadline time.Duration
		wantErr            bool
	}{
		"the defaults":                {},
		"whole seconds, longer":       {duration: 2 * time.Second, deadline: time.Second},
		"fractional seconds":          {duration: 1500 * time.Millisecond, deadline: 1200 * time.Millisecond, wantErr: true},
		"under a second":              {duration: 500 * time.Millisecond, deadline: 100 * time.Millisecond, wantErr: true},
		"no longer than the deadline": {duration: 10 * time.Second, deadline: 10 * time.Second, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			e := &Election{Client: fake.NewClientset(), Namespace: "ns", Name: "l", Identity: "a",
				LeaseDuration: tc.duration, RenewDeadline: tc.deadline, RetryPeriod: 10 * time.Millisecond}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			led := false
			err := e.Run(ctx, func(context.Context) { led = true; cancel() })
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "whole seconds") || led {
					t.Errorf("Run() = %v, led %v; want a refusal naming whole seconds, and no tenure", err, led)
				}
				return
			}
			if !led {
				t.Errorf("Run() = %v without leading; want it to hold the Lease", err)
			}
		})
	}
}
