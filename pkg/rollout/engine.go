package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/kubectl-dkc/dkc/pkg/apis/dkc/v1alpha1"
	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
	"github.com/kubectl-dkc/dkc/pkg/status"
)

// DefaultResync is how often Run looks at the rollout when no event came.
const DefaultResync = 10 * time.Second

// DefaultParallel is how many nodes Run starts (drains and assigns) at
// once by default. The budget bounds how many are under way in all; this
// only bounds the requests in flight, so that a wave of 100 starts in a
// fraction of a second rather than one node after another. All of a wave
// of 100 at once was measured slower, not faster: the apiserver then
// serves them all together and the wave's agents start together
// (docs/performance.md, "A rollout over 1000 simulated nodes").
const DefaultParallel = 32

var (
	// ErrHalted means the rollout halted on a node's error. It matches
	// status.ErrConfigError, so a command exits with status.ExitConfigError.
	ErrHalted error = haltedError{}
	// ErrPaused means the rollout is paused; `rollout resume` continues it.
	ErrPaused = errors.New("rollout paused")
	// ErrAborted means the operator aborted the rollout.
	ErrAborted = errors.New("rollout aborted")
)

type haltedError struct{}

func (haltedError) Error() string        { return "halted" }
func (haltedError) Is(target error) bool { return target == status.ErrConfigError }

// Options tune Run. The zero value works.
type Options struct {
	// Clock defaults to the real clock; tests step a fake one.
	Clock clock.Clock
	// Resync is how often the rollout is looked at without an event
	// (DefaultResync when 0). Progress is driven by watch events; the
	// resync only catches what a broken watch missed.
	Resync time.Duration
	// Drainer drains nodes in Spec.Drain; nil means a KubeDrainer with the
	// rollout's DrainOptions.
	Drainer Drainer
	// OnChange, when set, receives the rollout and its nodes' observations
	// after every pass that changed something. It runs in the pass.
	OnChange func(r *Rollout, observed map[string]Observed)
	// Log receives a line per pod a drain evicts; nil discards them.
	Log io.Writer
	// Parallel is how many nodes of a wave are drained and assigned at
	// once (DefaultParallel when 0). Never more than the budget are under
	// way, whatever it is.
	Parallel int
	// ReadOnly watches without acting: each node's phase is computed from
	// its carrier and passed to OnChange, nothing is written, and Run
	// returns once the rollout is Done, Halted or Aborted. This is
	// `rollout status -w`.
	ReadOnly bool
	// FollowInterval is the least time between two passes of a ReadOnly
	// follower (DefaultFollowInterval when 0): the changes that come
	// meanwhile are shown together. A pass looks at every node, and a
	// follower that made one per event spent a core on a large fleet.
	FollowInterval time.Duration
	// Nodes and Rollouts are synced informers on every Node and on the
	// rollouts of the store's namespace, which a Reconciler shares with
	// its host (the controller's): one watch and one cache for every
	// rollout it drives. Run, when they are nil, starts informers of its
	// own on the rollout's nodes and on the rollout.
	Nodes    cache.SharedIndexInformer
	Rollouts cache.SharedIndexInformer
	// StatusInterval bounds how often the driver writes the rollout only
	// because its counts changed (DefaultStatusInterval when 0); a change
	// of state, wave or soak is written at once.
	StatusInterval time.Duration
	// Identity names this driver in the rollout's Lease (LeaseName);
	// the host name and process ID when empty.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod time the rollout's
	// Lease (lease.Fence); zero means lease's defaults.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// AlertInterval is how often, at most, the driver asks the
	// Alertmanager of spec.pauseOnAlerts (DefaultAlertInterval when 0).
	AlertInterval time.Duration
	// RestrictAlertmanagers lets the driver ask only the Alertmanagers of
	// Alertmanagers (the controller's --alertmanager-url): a rollout that
	// names another starts no node, with reason AlertmanagerNotAllowed.
	// Unset, it asks the one the rollout names (the CLI, with its
	// operator's own reach).
	RestrictAlertmanagers bool
	Alertmanagers         []string
	// HTTPClient asks the Alertmanager; http.DefaultClient when nil.
	HTTPClient *http.Client
}

// DefaultFollowInterval is Options.FollowInterval's default.
const DefaultFollowInterval = 500 * time.Millisecond

// DefaultStatusInterval is Options.StatusInterval's default.
const DefaultStatusInterval = 5 * time.Second

// LeaseName is the name of the Lease, in the rollout's namespace, that
// fences the driver of rollout name: one driver at a time.
func LeaseName(name string) string {
	const prefix = "nodeconfigrollout-"
	if len(prefix)+len(name) <= validation.DNS1123SubdomainMaxLength {
		return prefix + name
	}
	sum := sha256.Sum256([]byte(name))
	tail := "-" + hex.EncodeToString(sum[:])[:10]
	return prefix + strings.TrimRight(name[:validation.DNS1123SubdomainMaxLength-len(prefix)-len(tail)], ".-") + tail
}

// isStale reports whether the server holds a version of the rollout other
// than the one the loop last read or wrote.
func (e *engine) isStale() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stale
}

// refresh reads the rollout again when the server holds a newer version.
func (e *engine) refresh(ctx context.Context) error {
	e.mu.Lock()
	stale := e.stale
	e.stale = false
	e.mu.Unlock()
	if !stale {
		return nil
	}
	r, err := e.store.Get(ctx, e.cur.Name)
	if err != nil {
		return err
	}
	e.setCurrent(r)
	return nil
}

// setCurrent records r, which this client just read: unless the informer
// has delivered a later version since, the loop's copy is current.
func (e *engine) setCurrent(r *Rollout) {
	e.cur = r
	e.mu.Lock()
	e.rv = r.ResourceVersion
	if e.seen == r.ResourceVersion {
		e.stale = false
	}
	e.mu.Unlock()
}

// delivered records that the rollout's informer delivered version rv of
// it ("" when deleted), and pokes the loop: the server holds a version
// other than the loop's unless rv is the one the loop last wrote or read.
// stop says that version asks that no further node start: the rollout is
// paused, aborted or deleted.
func (e *engine) delivered(rv string, stop bool) {
	e.mu.Lock()
	if rv == "" || rv != e.rv {
		e.stale = true
	}
	e.seen = rv
	e.stopAsked = stop
	e.mu.Unlock()
	e.poke()
}

// wrote records r, which this client just wrote. The watch often delivers
// the write before its response arrives, and the handler then took it for
// another client's: unless the informer has delivered a later version
// since, the loop's copy is current, and the next pass need not read the
// rollout again. (A later version of another client's would have made the
// write fail with a conflict instead.)
func (e *engine) wrote(r *Rollout) {
	e.cur = r
	e.mu.Lock()
	e.rv = r.ResourceVersion
	if e.seen == r.ResourceVersion {
		e.stale = false
	}
	e.mu.Unlock()
}

// write stores r. It reports false, and marks the rollout stale, when
// another client wrote it first: the pass is then redone on fresh state.
func (e *engine) write(ctx context.Context, r *Rollout) (bool, error) {
	r = r.DeepCopy()
	if !Lists(e.cur) {
		// r's nodes were resolved (Resolve): the object does not hold them.
		r.Spec = *e.cur.Spec.DeepCopy()
	}
	bound(r)
	got, err := e.store.UpdateStatus(ctx, r)
	if errors.Is(err, ErrConflict) {
		e.mu.Lock()
		e.stale = true
		e.mu.Unlock()
		e.poke()
		return false, nil
	}
	if err != nil {
		return false, err
	}
	e.wrote(got)
	e.written = e.opts.Clock.Now()
	return true, nil
}

// bound cuts r's reason and its failures' errors to MaxMessageBytes: what
// the nodes report does not grow the object.
func bound(r *Rollout) {
	r.Status.Reason = kubeletconfig.Shorten(r.Status.Reason, v1alpha1.MaxMessageBytes)
	for i := range r.Status.Failures {
		r.Status.Failures[i].Error = kubeletconfig.Shorten(r.Status.Failures[i].Error, v1alpha1.MaxMessageBytes)
	}
}

// StateError is the error that driving or following r ends with, given its
// state: it halted on a node's error (ErrHalted), was aborted (ErrAborted)
// or paused (ErrPaused); nil when it runs or is done.
func StateError(r *Rollout) error {
	switch r.State() {
	case Halted:
		return fmt.Errorf("rollout %q %w: %s", r.Name, ErrHalted, r.Status.Reason)
	case Aborted:
		return fmt.Errorf("rollout %q: %w", r.Name, ErrAborted)
	case Paused:
		return fmt.Errorf("rollout %q: %w: continue it with kubectl dkc rollout resume %s", r.Name, ErrPaused, r.Name)
	}
	return nil
}
