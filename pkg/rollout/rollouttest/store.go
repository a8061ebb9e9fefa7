// Package rollouttest gives the tests of the rollout commands and the
// controller a rollout store on client-go's fake dynamic client.
package rollouttest

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/kubectl-dkc/dkc/pkg/rollout"
)

// NewStore returns a store of namespace on a fake dynamic client that
// holds rollouts, each as a client created it and its driver then wrote
// its status. The fake keeps no status subresource apart: unlike an
// apiserver, it stores a status sent with the object.
func NewStore(t testing.TB, namespace string, rollouts ...*rollout.Rollout) *rollout.Store {
	t.Helper()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{rollout.Resource: rollout.Kind + "List"})
	store := &rollout.Store{Client: dyn, Namespace: namespace}
	for _, r := range rollouts {
		created, err := store.Create(context.Background(), r, false)
		if err != nil {
			t.Fatal(err)
		}
		created.Status = r.Status
		if _, err := store.UpdateStatus(context.Background(), created); err != nil {
			t.Fatal(err)
		}
	}
	return store
}
