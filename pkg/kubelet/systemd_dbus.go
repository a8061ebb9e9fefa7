package kubelet

import (
	"context"

	"github.com/coreos/go-systemd/v22/dbus"
)

// connectSystemd connects to the system bus's systemd.
func connectSystemd(ctx context.Context) (unitManager, error) {
	return dbus.NewSystemConnectionContext(ctx)
}
