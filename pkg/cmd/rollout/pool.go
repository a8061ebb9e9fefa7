package rollout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/pool"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/source"
	dkcstatus "github.com/kubectl-dkc/dkc/pkg/status"
	"github.com/kubectl-dkc/dkc/pkg/table"
)

// poolPrefixes name a NodeConfigPool where a command takes NAME.
var poolPrefixes = []string{"ncp/", "nodeconfigpool/", "nodeconfigpools/", "nodeconfigpool.kubectl-dkc.io/"}

// poolArg returns the pool arg names (ncp/NAME and the like), or false
// when arg names no pool.
func poolArg(arg string) (string, bool) {
	for _, p := range poolPrefixes {
		if name, ok := strings.CutPrefix(arg, p); ok && name != "" {
			return name, true
		}
	}
	return "", false
}

// poolRevisions reads pool name and its revisions, oldest first.
func poolRevisions(ctx context.Context, pools *pool.Store, rollouts *rollout.Store, name string) (*pool.Pool, []pool.Revision, error) {
	p, err := pools.Get(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	all, err := rollouts.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	own, _ := pool.Split(name, all)
	return p, pool.Revisions(own), nil
}

// printPoolHistory prints a pool's revisions, as kubectl rollout history
// prints a Deployment's.
func printPoolHistory(streams genericiooptions.IOStreams, p *pool.Pool, revs []pool.Revision) error {
	fmt.Fprintf(streams.Out, "nodeconfigpool/%s\n", p.Name)
	if len(revs) == 0 {
		fmt.Fprintln(streams.ErrOut, "No revisions found.")
		return nil
	}
	t := table.New("Revision", "Config", "Digest", "Allow-Unsafe", "Rollouts", "State", "Created")
	for _, r := range revs {
		first, latest := r.Rollouts[0], r.Latest()
		var names []string
		for _, ro := range r.Rollouts {
			names = append(names, ro.Name)
		}
		var digest, allow string
		if pin := first.Spec.Pin; pin != nil {
			digest, allow = source.ShortDigest(pin.Digest), strings.Join(pin.AllowUnsafe, ",")
		}
		revision := fmt.Sprint(r.Number)
		if r.Number == p.Status.Revision {
			revision += " (current)"
		}
		table.AddRow(t, revision, rollout.DescribeTarget(first.Spec.Config), table.OrNone(digest), table.OrNone(allow),
			strings.Join(names, ","), string(latest.State()), first.CreationTimestamp.UTC().Format(time.RFC3339))
	}
	return table.Print(streams.Out, t)
}

// undoPool points pool name back at revision to's config (0: the revision
// before the current one), pinned to the bytes that revision pinned; the
// controller rolls it out as the pool's next revision. It asks first
// whether the caller may allow that revision's classes, and drain when the
// pool does.
func undoPool(ctx context.Context, client kubernetes.Interface, pools *pool.Store, rollouts *rollout.Store, name string, to int64, out io.Writer) error {
	p, revs, err := poolRevisions(ctx, pools, rollouts, name)
	if err != nil {
		return err
	}
	r, err := pool.UndoTarget(p, revs, to)
	if err != nil {
		return err
	}
	first := r.Rollouts[0]
	if err := util.CheckAuthority(ctx, client, first.Spec.Pin.AllowUnsafe, p.Spec.Strategy.Drain); err != nil {
		return fmt.Errorf("undo nodeconfigpool %q to revision %d: %w", name, r.Number, err)
	}
	if _, err := pools.SetConfig(ctx, name, p.ResourceVersion, first.Spec.Config, first.Spec.Pin); err != nil {
		return err
	}
	fmt.Fprintf(out, "nodeconfigpool.kubectl-dkc.io/%s rolled back to revision %d (%s, %s)\n", name, r.Number,
		rollout.DescribeTarget(first.Spec.Config), source.ShortDigest(first.Spec.Pin.Digest))
	return nil
}

// printPoolStatus prints pool p's state, and its current rollout's table.
func printPoolStatus(ctx context.Context, out io.Writer, client kubernetes.Interface, rollouts *rollout.Store, p *pool.Pool) error {
	fmt.Fprintln(out, describePool(p))
	if p.Status.CurrentRollout == "" {
		return nil
	}
	r, err := rollouts.Get(ctx, p.Status.CurrentRollout)
	if errors.Is(err, rollout.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	live, err := rollout.LiveStatus(ctx, client, r)
	if err != nil {
		return err
	}
	return rollout.PrintTable(out, live)
}

// describePool is a pool's one-line state: the condition that is True,
// its message, the revision and the counts.
func describePool(p *pool.Pool) string {
	state, msg := "Unknown", "the controller has not reported on it"
	if p.Status.ObservedGeneration == p.Generation {
		for _, typ := range []string{pool.Stalled, pool.Ready, pool.Reconciling} {
			if c := meta.FindStatusCondition(p.Status.Conditions, typ); c != nil && c.Status == metav1.ConditionTrue {
				state, msg = typ, c.Message
				break
			}
		}
	}
	n := p.Status.Nodes
	return fmt.Sprintf("nodeconfigpool/%s: %s (%s), revision %d, %d nodes selected, %d updated, %d available, %d failed, %d in other pools too",
		p.Name, state, msg, p.Status.Revision, n.Selected, n.Updated, n.Available, n.Failed, n.Conflicting)
}

// followPool prints pool name's state whenever it changes, until it is
// Ready (nil), Stalled (exit 2) or timeout passes (exit 3).
func followPool(ctx context.Context, out io.Writer, pools *pool.Store, name string, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = 365 * 24 * time.Hour
	}
	last := ""
	var stalled *metav1.Condition
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := pools.Get(ctx, name)
		if err != nil {
			return false, err
		}
		if line := describePool(p); line != last {
			fmt.Fprintln(out, line)
			last = line
		}
		if p.Status.ObservedGeneration != p.Generation {
			return false, nil
		}
		if c := meta.FindStatusCondition(p.Status.Conditions, pool.Stalled); c != nil && c.Status == metav1.ConditionTrue {
			stalled = c
			return true, nil
		}
		return meta.IsStatusConditionTrue(p.Status.Conditions, pool.Ready), nil
	})
	switch {
	case err == nil && stalled != nil:
		return &util.ExitError{Code: dkcstatus.ExitConfigError, Err: fmt.Errorf("nodeconfigpool %q is stalled (%s): %s", name, stalled.Reason, stalled.Message)}
	case errors.Is(err, context.DeadlineExceeded):
		return &util.ExitError{Code: dkcstatus.ExitTimeout, Err: fmt.Errorf("%w after %s: nodeconfigpool %q is not Ready", dkcstatus.ErrTimeout, timeout, name)}
	}
	return err
}

// poolStore is the pool store beside rollouts, in its namespace.
func poolStore(rollouts *rollout.Store) *pool.Store {
	return &pool.Store{Client: rollouts.Client, Namespace: rollouts.Namespace}
}
