// Package kubelet holds the node agent's effects on the kubelet: writing its
// config (replace or drop-in), restarting it (systemd over D-Bus, or a
// command), and probing its health after a restart. Each effect is a small
// interface with a fake in pkg/kubelet/fake.
//
// # The replace writer's baseline
//
// In replace mode dkc overwrites the kubelet's --config file, so the
// ReplaceWriter keeps the file's local content, the baseline, in the
// checkpoint store (BaselineName). The rule is: a baseline is kept exactly
// while dkc's config may be in the file.
//
//   - Apply takes the baseline when there is none: the file holds the local
//     config then, as it is at that moment, with every edit the operator made
//     while the node ran it. With a baseline kept, Apply leaves it alone, since
//     the file may hold an earlier dkc config.
//   - Restore writes the baseline back to the file (atomically, durably) and
//     only then removes it. Every Restore ends dkc's hold on the file: a reset,
//     a rollback to a local last-known-good config after a failed health gate,
//     and an agent start that finds the local config active. After a rollback
//     to local the store still names the failed assignment, but the file is the
//     local config; a later reset has nothing to restore, and a later Apply
//     takes the file as it is then.
//   - Restore without a baseline leaves the file alone: dkc has nothing in it.
//
// A crash between Restore's write and the removal leaves a baseline equal to
// the file, which is harmless: the next Restore writes the same bytes, the
// next Apply keeps it as the local config. The baseline is never removed
// before the file is restored: the file would hold dkc's config with nothing
// to restore, and the next Apply would take dkc's config for the local one.
package kubelet

import (
	"context"
	"time"
)

// ApplyMode is how the agent hands a config to the kubelet.
type ApplyMode string

const (
	// Replace writes the whole payload to the kubelet's --config file:
	// upstream DKC's full-replacement semantics.
	Replace ApplyMode = "replace"
	// DropIn writes the payload as one dkc-owned *.conf file in the
	// kubelet's --config-dir, merged over --config as a JSON merge patch.
	DropIn ApplyMode = "dropin"
)

// DropInName is the file dkc owns in the kubelet's --config-dir. The "50-"
// prefix lets operators order their own drop-ins before or after it.
const DropInName = "50-kubectl-dkc.conf"

// Writer writes the kubelet's config on disk. Every write is atomic (temp
// file, fsync, rename, fsync of the directory), so a crash leaves the old
// or the new file, never a torn one.
type Writer interface {
	// Mode is the writer's ApplyMode.
	Mode() ApplyMode
	// Local returns the node's own config as the operator left it, before
	// dkc wrote anything: the --config file (replace), or nothing (drop-in,
	// where the local config is --config without dkc's drop-in).
	Local() ([]byte, error)
	// Apply makes payload the config the kubelet will load on its next start.
	Apply(payload []byte) error
	// Restore puts the node's local config back.
	Restore() error
	// Effective is the full config the kubelet will load on its next start:
	// --config with every *.conf drop-in merged over it in lexical order.
	Effective() ([]byte, error)
	// Preview is the full config, as JSON, that Effective would return
	// after Apply(payload), computed without writing anything; a nil
	// payload previews Restore. Replace: payload with the config dir's
	// drop-ins merged over it. Drop-in: --config with the drop-ins merged
	// over it in lexical order, payload taking the place of DropInName.
	Preview(payload []byte) ([]byte, error)
}

// Restarter restarts the kubelet and returns once the restart job finished.
// A failed or timed-out job is an error; a timeout never counts as success.
type Restarter interface {
	Restart(ctx context.Context) error
	// Stop and Start are used around a state-file removal (a cpu or memory
	// manager policy change), which must happen while the kubelet is down.
	Stop(ctx context.Context) error
	Start(ctx context.Context) error
}

// Expectation is what a healthy kubelet shows after a restart.
type Expectation struct {
	// Config is the full config the kubelet should run (as JSON or YAML);
	// the probe compares the fields it sets with /configz.
	Config []byte
	// Since is when the restart began; take it just before calling the
	// Restarter. The kubelet's Lease must be renewed, and its Ready
	// condition reported, after it, so that a stale Ready does not count.
	Since time.Time
	// Running, when set, is called once, the first time an attempt finds
	// /healthz passing and /configz showing Config, both answered by the
	// kubelet itself: the kubelet runs Config. The probe then goes on to
	// wait for the Node's Ready. It is not called for a configz the probe
	// could not verify, and it runs on the caller's goroutine, inside Probe.
	Running func()
}

// Prober checks a restarted kubelet: /healthz OK, /configz showing the
// expected values, and the Node Ready. It returns nil once all three hold
// and an error describing what failed when ctx ends first.
type Prober interface {
	Probe(ctx context.Context, want Expectation) error
	// Running returns the JSON of the config the kubelet runs now, as its
	// /configz shows it (flags and computed values merged over its files),
	// asking the kubelet at the address of current, the effective config
	// it was started on. It fails when the kubelet does not answer.
	Running(ctx context.Context, current []byte) ([]byte, error)
	// Flags returns the kubelet's command-line flags, by name, as its
	// /flagz lists them, asking the kubelet at the address of current. A
	// kubelet that does not serve /flagz is flagz.ErrNotServed.
	Flags(ctx context.Context, current []byte) (map[string]string, error)
}
