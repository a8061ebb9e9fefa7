// A pool's revisions: each change of its config is one, rolled out by
// one or more rollouts labelled with it. These are the rules that the
// controller (Decide), rollout history and rollout undo of ncp/POOL share.

package pool

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kubectl-dkc/dkc/pkg/rollout"
)

// Revision is one revision of a pool: its number and its rollouts, oldest
// first. Its config is its rollouts' (Spec.Config and Spec.Pin).
type Revision struct {
	Number   int64
	Rollouts []*rollout.Rollout
}

// Latest is the revision's newest rollout.
func (r Revision) Latest() *rollout.Rollout { return r.Rollouts[len(r.Rollouts)-1] }

// Revisions groups a pool's rollouts by RevisionLabel, oldest revision
// first; a rollout without a valid revision is left out.
func Revisions(rollouts []*rollout.Rollout) []Revision {
	m := map[int64][]*rollout.Rollout{}
	for _, r := range rollouts {
		n, err := strconv.ParseInt(r.Labels[RevisionLabel], 10, 64)
		if err != nil || n < 1 {
			continue
		}
		m[n] = append(m[n], r)
	}
	var out []Revision
	for n, rs := range m {
		slices.SortFunc(rs, func(a, b *rollout.Rollout) int {
			if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
				return c
			}
			return strings.Compare(a.Name, b.Name)
		})
		out = append(out, Revision{Number: n, Rollouts: rs})
	}
	slices.SortFunc(out, func(a, b Revision) int { return int(a.Number - b.Number) })
	return out
}

// Split returns the rollouts of pool name (Label), and the others.
func Split(name string, all []*rollout.Rollout) (own, others []*rollout.Rollout) {
	for _, r := range all {
		if r.Labels[Label] == name {
			own = append(own, r)
		} else {
			others = append(others, r)
		}
	}
	return own, others
}

// UndoTarget is the revision that `rollout undo ncp/POOL --to-revision=to`
// takes pool p back to, among its revisions revs (oldest first): revision
// to, or with to 0 the newest before the current one. The pool then names
// that revision's config, pinned to the bytes and classes it pinned, and
// the controller rolls it out as its next revision.
func UndoTarget(p *Pool, revs []Revision, to int64) (Revision, error) {
	if to == 0 {
		for i := len(revs) - 1; i >= 0; i-- {
			if revs[i].Number < p.Status.Revision {
				to = revs[i].Number
				break
			}
		}
		if to == 0 {
			return Revision{}, fmt.Errorf("nodeconfigpool %q has no revision before its current one (%d): name one with --to-revision (kubectl dkc rollout history ncp/%s)", p.Name, p.Status.Revision, p.Name)
		}
	}
	for _, r := range revs {
		if r.Number != to {
			continue
		}
		if first := r.Rollouts[0]; first.Spec.Config == nil || first.Spec.Pin == nil {
			return Revision{}, fmt.Errorf("revision %d of nodeconfigpool %q names no config", to, p.Name)
		}
		return r, nil
	}
	return Revision{}, fmt.Errorf("nodeconfigpool %q has no revision %d (kubectl dkc rollout history ncp/%s lists them)", p.Name, to, p.Name)
}

// RolloutName names the rollout of pool's revision rev that follows n
// earlier rollouts of it: POOL-REV, then POOL-REV-2, POOL-REV-3 for nodes
// that joined later. The names are fixed, so that a controller that died
// after creating one does not create another.
func RolloutName(pool string, rev int64, n int) string {
	if n == 0 {
		return fmt.Sprintf("%s-%d", pool, rev)
	}
	return fmt.Sprintf("%s-%d-%d", pool, rev, n+1)
}
