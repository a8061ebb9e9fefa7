package argocd

import (
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dkc/dkc/pkg/pool"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
)

var doc = filepath.Join("..", "..", "docs", "rollout.md")

func checks(t *testing.T) map[string]string {
	t.Helper()
	c, err := Checks(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"NodeConfigPool", "NodeConfigRollout"} {
		if c[kind] == "" {
			t.Fatalf("%s has no Argo CD health check for %s", doc, kind)
		}
	}
	return c
}

// conditions are the pool's three conditions as the controller writes
// them: typ True, the other two False, all with reason and msg.
func conditions(typ, reason, msg string, generation int64) []metav1.Condition {
	var cs []metav1.Condition
	for _, t := range []string{pool.Ready, pool.Reconciling, pool.Stalled} {
		status := metav1.ConditionFalse
		if t == typ {
			status = metav1.ConditionTrue
		}
		cs = append(cs, metav1.Condition{Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: generation})
	}
	return cs
}

func TestPoolHealth(t *testing.T) {
	script := checks(t)["NodeConfigPool"]
	newPool := func(generation int64, paused bool, st pool.Status) *pool.Pool {
		p := &pool.Pool{
			TypeMeta:   metav1.TypeMeta{APIVersion: "kubectl-dkc.io/v1alpha1", Kind: "NodeConfigPool"},
			ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: "kube-system", Generation: generation},
			Status:     st,
		}
		p.Spec.Paused = paused
		return p
	}
	for name, tc := range map[string]struct {
		pool *pool.Pool
		want Health
	}{
		"not yet seen by the controller": {
			pool: newPool(1, false, pool.Status{}),
			want: Health{Status: "Progressing", Message: "Waiting for the controller"},
		},
		"rolling out": {
			pool: newPool(1, false, pool.Status{ObservedGeneration: 1, Conditions: conditions(pool.Reconciling, pool.ReasonRollingOut, "rollout workers-1: 1 of 3 nodes updated", 1)}),
			want: Health{Status: "Progressing", Message: "rollout workers-1: 1 of 3 nodes updated"},
		},
		"Ready": {
			pool: newPool(1, false, pool.Status{ObservedGeneration: 1, Conditions: conditions(pool.Ready, pool.ReasonUpdated, "3 of 3 nodes run revision 1", 1)}),
			want: Health{Status: "Healthy", Message: "3 of 3 nodes run revision 1"},
		},
		"Ready of an older spec is not Healthy": {
			pool: newPool(2, false, pool.Status{ObservedGeneration: 1, Conditions: conditions(pool.Ready, pool.ReasonUpdated, "3 of 3 nodes run revision 1", 1)}),
			want: Health{Status: "Progressing", Message: "Waiting for the controller"},
		},
		"Stalled": {
			pool: newPool(1, false, pool.Status{ObservedGeneration: 1, Conditions: conditions(pool.Stalled, pool.ReasonRolloutHalted, "rollout workers-1 halted: node-2 rolled back", 1)}),
			want: Health{Status: "Degraded", Message: "rollout workers-1 halted: node-2 rolled back"},
		},
		"paused": {
			pool: newPool(1, true, pool.Status{ObservedGeneration: 1, Conditions: conditions(pool.Reconciling, pool.ReasonPaused, "paused", 1)}),
			want: Health{Status: "Suspended", Message: "paused"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Run(script, tc.pool)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("health %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestRolloutHealth(t *testing.T) {
	script := checks(t)["NodeConfigRollout"]
	newRollout := func(state rollout.State, paused bool, wave int, reason string) *rollout.Rollout {
		r := rollout.New("kube-system", "workers-1", rollout.Spec{Paused: paused, Canary: 1})
		r.Status.State = state
		r.Status.Wave = wave
		r.Status.Reason = reason
		return r
	}
	for name, tc := range map[string]struct {
		rollout *rollout.Rollout
		want    Health
	}{
		"running":          {newRollout(rollout.Running, false, 2, ""), Health{Status: "Progressing", Message: "wave 2"}},
		"paused by spec":   {newRollout(rollout.Running, true, 1, ""), Health{Status: "Suspended"}},
		"paused":           {newRollout(rollout.Paused, true, 1, ""), Health{Status: "Suspended"}},
		"done":             {newRollout(rollout.Done, false, 3, ""), Health{Status: "Healthy"}},
		"halted":           {newRollout(rollout.Halted, false, 1, "node-2 rolled back"), Health{Status: "Degraded", Message: "node-2 rolled back"}},
		"aborted":          {newRollout(rollout.Aborted, false, 1, "aborted by an operator"), Health{Status: "Degraded", Message: "aborted by an operator"}},
		"no status at all": {rollout.New("kube-system", "workers-1", rollout.Spec{Canary: 1}), Health{Status: "Progressing", Message: "wave 0"}},
	} {
		t.Run(name, func(t *testing.T) {
			obj, err := rollout.Encode(tc.rollout)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Run(script, obj.Object)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("health %+v, want %+v", got, tc.want)
			}
		})
	}
}
