package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kubectl-dkc/dkc/pkg/status"
)

// timeline records, from a watch on every Node in the benchmark's own
// process, when each node was first seen assigned the rollout's target and
// when its status first showed the target active: with the fake kubelets'
// restart starts and gate ends, it splits a slot handover into the agent's
// report, the driver's reaction and the agent's pickup.
type timeline struct {
	target string

	mu       sync.Mutex
	assigned map[string]time.Time
	active   map[string]time.Time
}

// watchTimeline starts the timeline's watch and returns once it synced.
func watchTimeline(ctx context.Context, client kubernetes.Interface, target string) (*timeline, error) {
	t := &timeline{target: target, assigned: map[string]time.Time{}, active: map[string]time.Time{}}
	f := informers.NewSharedInformerFactory(client, 0)
	inf := f.Core().V1().Nodes().Informer()
	on := func(obj any) {
		node, ok := obj.(*corev1.Node)
		if !ok {
			return
		}
		now := time.Now()
		item, err := status.FromNode(node)
		if err != nil || item.ConfigSource == nil || item.ConfigSource.ConfigMap == nil || item.ConfigSource.ConfigMap.Name != t.target {
			return
		}
		done, _ := status.Reached(item, status.WaitActive)
		t.mu.Lock()
		defer t.mu.Unlock()
		if _, ok := t.assigned[node.Name]; !ok {
			t.assigned[node.Name] = now
		}
		if _, ok := t.active[node.Name]; !ok && done {
			t.active[node.Name] = now
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: on, UpdateFunc: func(_, o any) { on(o) }}); err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("watch %v: %w", typ, ctx.Err())
		}
	}
	return t, nil
}

// split returns, per node, the gate's end to its status seen active
// (report) and its assignment seen to its restart's start (pickup); and,
// pairing the i-th node seen active with the (budget+i)-th seen assigned,
// the driver's reaction.
func (t *timeline) split(starts, ends map[string]time.Time, budget int) (report, react, pickup []time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var act, asg []time.Time
	for name, at := range t.active {
		act = append(act, at)
		if end, ok := ends[name]; ok {
			report = append(report, at.Sub(end))
		}
	}
	for name, at := range t.assigned {
		asg = append(asg, at)
		if s, ok := starts[name]; ok {
			pickup = append(pickup, s.Sub(at))
		}
	}
	byTime := func(v []time.Time) { sort.Slice(v, func(i, j int) bool { return v[i].Before(v[j]) }) }
	byTime(act)
	byTime(asg)
	for i := 0; budget+i < len(asg) && i < len(act); i++ {
		react = append(react, asg[budget+i].Sub(act[i]))
	}
	return report, react, pickup
}
