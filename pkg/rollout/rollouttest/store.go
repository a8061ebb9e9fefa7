// Package rollouttest gives the tests of the rollout commands and the
// controller a rollout store on client-go's fake dynamic client.
package rollouttest

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dkc/dkc/pkg/rollout"
)

// UID is the UID the store gives rollout name when it creates it, unless
// it has one: a node's mark (rollout.Mark) names its rollout by UID.
func UID(name string) types.UID { return types.UID("uid-" + name) }

// NewStore returns a store of namespace on a fake dynamic client that
// holds rollouts, each as a client created it and its driver then wrote
// its status. The fake gives each rollout created a UID (UID), as an
// apiserver does, and keeps no status subresource apart: unlike an
// apiserver, it stores a status sent with the object.
func NewStore(t testing.TB, namespace string, rollouts ...*rollout.Rollout) *rollout.Store {
	t.Helper()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{rollout.Resource: rollout.Kind + "List"})
	dyn.PrependReactor("create", rollout.Resource.Resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		if u, ok := a.(k8stesting.CreateAction).GetObject().(*unstructured.Unstructured); ok && u.GetUID() == "" {
			u.SetUID(UID(u.GetName()))
		}
		return false, nil, nil
	})
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
