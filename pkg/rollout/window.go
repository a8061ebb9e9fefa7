// Maintenance windows: the times at which a rollout may start nodes
// (v1alpha1.Window; docs/rollout.md, "Maintenance windows").

package rollout

import (
	"time"
	// Zones load on nodes and in images without /usr/share/zoneinfo.
	_ "time/tzdata"

	"github.com/kubectl-dkc/dkc/pkg/apis/dkc/v1alpha1"
)

// ReasonOutsideWindow starts a running rollout's status.reason while it is
// outside every window of spec.windows (v1alpha1.ReasonOutsideWindow).
const ReasonOutsideWindow = v1alpha1.ReasonOutsideWindow

// WindowForm is the form --window takes, for messages.
const WindowForm = v1alpha1.WindowForm

// MaxWindowDuration is the longest window: a week.
const MaxWindowDuration = v1alpha1.MaxWindowDuration

// ParseWindow parses a window in the form of --window (WindowForm).
func ParseWindow(s string) (Window, error) { return v1alpha1.ParseWindow(s) }

// OutsideWindowReason is a rollout's status.reason while it waits, at now,
// for the next window of ws.
func OutsideWindowReason(ws Windows, now time.Time) string {
	return v1alpha1.OutsideWindowReason(ws, now)
}
