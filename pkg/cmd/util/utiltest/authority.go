// Package utiltest holds the fakes that the tests of dkc's commands share.
package utiltest

import (
	"slices"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// Authorize makes client answer SelfSubjectAccessReviews as grant says,
// as RBAC would for the caller, and returns the attributes asked, in order.
func Authorize(client *fake.Clientset, grant func(a *authorizationv1.ResourceAttributes) bool) *[]authorizationv1.ResourceAttributes {
	asked := new([]authorizationv1.ResourceAttributes)
	client.PrependReactor("create", "selfsubjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		r := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		*asked = append(*asked, *r.Spec.ResourceAttributes)
		r.Status.Allowed = grant(r.Spec.ResourceAttributes)
		return true, r, nil
	})
	return asked
}

// MayUse grants the use of classes, and nothing else.
func MayUse(classes ...string) func(a *authorizationv1.ResourceAttributes) bool {
	return func(a *authorizationv1.ResourceAttributes) bool {
		return a.Group == source.Group && a.Resource == source.UnsafeClassesResource && a.Verb == source.UseVerb && slices.Contains(classes, a.Name)
	}
}
