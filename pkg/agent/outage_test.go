package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// An apiserver outage leaves the kubelet as it is. Whatever the agent was
// doing when the apiserver went away, the syncs of an hour-long outage
// (the drift checks, the trial's end, the retries of a status that cannot
// be published) neither write the kubelet's config nor restart it. The
// agent syncs from what its informers last saw: the Node, and the assigned
// ConfigMap when its informer had listed it.
func TestOutageLeavesKubeletAlone(t *testing.T) {
	tests := map[string]struct {
		// setup brings the node to where the outage finds it.
		setup func(t *testing.T, e *env)
		// cached: the informer holds the assigned ConfigMap, so that it
		// stays readable; otherwise reading it fails as a list would.
		cached bool
	}{
		"on its last-known-good config": {
			setup:  func(t *testing.T, e *env) { e.onLastKnownGood(t, "a", cfgA) },
			cached: true,
		},
		"in the trial of a config, and the outage outlasts the trial": {
			setup: func(t *testing.T, e *env) {
				e.onLastKnownGood(t, "a", cfgA)
				e.configMap(t, "b", cfgB, nil)
				e.assign(t, "b")
				e.sync(t)
			},
			cached: true,
		},
		"a new assignment seen, its ConfigMap not downloaded yet": {
			setup: func(t *testing.T, e *env) {
				e.onLastKnownGood(t, "a", cfgA)
				e.configMap(t, "b", cfgB, nil)
				e.assign(t, "b")
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			tc.setup(t, e)
			node := e.node(t)
			var cm *corev1.ConfigMap
			if tc.cached {
				src, _, err := source.Assigned(node)
				if err != nil {
					t.Fatal(err)
				}
				if cm, err = e.getConfigMap(src.ConfigMap.Namespace, src.ConfigMap.Name); err != nil {
					t.Fatal(err)
				}
			}
			before := e.writer.Current
			applies, restarts := len(e.writer.Applied), e.restart.CallsSnapshot()

			// The apiserver goes away: every request fails.
			refused := errors.New("dial tcp 10.0.0.1:6443: connect: connection refused")
			e.client.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, refused
			})
			get := func(_, _ string, _ bool) (*corev1.ConfigMap, error) {
				if cm != nil {
					return cm, nil
				}
				return nil, &listError{err: refused}
			}
			for range 60 {
				e.clk.Step(time.Minute)
				// An error is retried with backoff; it must not touch
				// the kubelet either.
				_, _ = e.a.sync(context.Background(), node.DeepCopy(), get)
			}

			diff(t, "kubelet config", string(before), string(e.writer.Current))
			diff(t, "kubelet config writes", applies, len(e.writer.Applied))
			diff(t, "restarter calls", restarts, e.restart.CallsSnapshot())
		})
	}
}
