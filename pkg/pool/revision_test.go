package pool

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-dkc/dkc/pkg/rollout"
)

func TestUndoTarget(t *testing.T) {
	p := newPool("workers", "c", nil)
	p.Status.Revision = 3
	r1 := poolRollout(p, "workers-1", 1, "a", rollout.Done, 1)
	r2 := poolRollout(p, "workers-2", 2, "b", rollout.Done, 2)
	r3 := poolRollout(p, "workers-3", 3, "c", rollout.Halted, 3)
	local := poolRollout(p, "workers-4", 4, "d", rollout.Done, 4)
	local.Spec.Config, local.Spec.Pin = nil, nil
	revs := Revisions([]*rollout.Rollout{r3, r1, local, r2})
	for name, tc := range map[string]struct {
		to      int64
		want    string // the revision's first rollout
		wantErr string
	}{
		"by default, the revision before the current one": {want: "workers-2"},
		"a revision named": {to: 1, want: "workers-1"},
		"a revision that does not exist": {
			to:      7,
			wantErr: `nodeconfigpool "workers" has no revision 7 (kubectl dkc rollout history ncp/workers lists them)`,
		},
		"a revision without a config": {
			to:      4,
			wantErr: `revision 4 of nodeconfigpool "workers" names no config`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := UndoTarget(p, revs, tc.to)
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			name := ""
			if len(got.Rollouts) > 0 {
				name = got.Rollouts[0].Name
			}
			if diff := cmp.Diff(tc.want, name); diff != "" {
				t.Errorf("revision (-want +got):\n%s", diff)
			}
		})
	}
	first := newPool("workers", "a", nil)
	first.Status.Revision = 1
	if _, err := UndoTarget(first, revs[:1], 0); errString(err) != `nodeconfigpool "workers" has no revision before its current one (1): name one with --to-revision (kubectl dkc rollout history ncp/workers)` {
		t.Errorf("undo of a pool at its first revision: %v", err)
	}
}

func TestSplit(t *testing.T) {
	p := newPool("workers", "a", nil)
	own := poolRollout(p, "workers-1", 1, "a", rollout.Done, 1)
	other := rollout.New("kube-system", "by-hand", rollout.Spec{})
	gotOwn, gotOthers := Split("workers", []*rollout.Rollout{other, own})
	if len(gotOwn) != 1 || gotOwn[0] != own || len(gotOthers) != 1 || gotOthers[0] != other {
		t.Errorf("Split: own %v, others %v", gotOwn, gotOthers)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
