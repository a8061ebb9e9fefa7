package util

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// DeniedError is a write that its author may not make: the unsafe classes
// it allows that the author may not use, and whether it drains nodes
// without the right to evict pods. It says so in the words of the
// admission policies (source.UnsafeClassesDenied, source.EvictionDenied).
type DeniedError struct {
	Classes  []string
	Eviction bool
}

func (e *DeniedError) Error() string {
	var msgs []string
	if len(e.Classes) > 0 {
		msgs = append(msgs, source.UnsafeClassesDenied(e.Classes))
	}
	if e.Eviction {
		msgs = append(msgs, source.EvictionDenied)
	}
	return strings.Join(msgs, "; ")
}

// CheckAuthority asks the apiserver, with SelfSubjectAccessReviews, whether
// the caller may allow each of classes (source.UseVerb on
// source.UnsafeClassesResource in source.Group, named by the class) and,
// when drain, evict pods in every namespace (create pods/eviction), as the
// admission policies will when the write arrives. It returns a
// *DeniedError naming what the caller lacks, before anything is written;
// nil when nothing is asked. assign, rollout start and rollout undo call it
// (not with --dry-run=client, which, as kubectl's, asks the server nothing).
func CheckAuthority(ctx context.Context, client kubernetes.Interface, classes []string, drain bool) error {
	denied := &DeniedError{}
	for _, c := range classes {
		ok, err := allowed(ctx, client, &authorizationv1.ResourceAttributes{
			Group: source.Group, Resource: source.UnsafeClassesResource, Name: c, Verb: source.UseVerb,
		})
		if err != nil {
			return err
		}
		if !ok {
			denied.Classes = append(denied.Classes, c)
		}
	}
	if drain {
		ok, err := allowed(ctx, client, &authorizationv1.ResourceAttributes{
			Namespace: metav1.NamespaceAll, Resource: "pods", Subresource: "eviction", Verb: "create",
		})
		if err != nil {
			return err
		}
		denied.Eviction = !ok
	}
	if len(denied.Classes) > 0 || denied.Eviction {
		return denied
	}
	return nil
}

// allowed asks whether the caller may do attrs.
func allowed(ctx context.Context, client kubernetes.Interface, attrs *authorizationv1.ResourceAttributes) (bool, error) {
	r, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attrs},
	}, metav1.CreateOptions{})
	if err != nil {
		what := attrs.Resource
		if attrs.Subresource != "" {
			what += "/" + attrs.Subresource
		}
		if attrs.Name != "" {
			what += " " + attrs.Name
		}
		return false, fmt.Errorf("selfsubjectaccessreview of %s %s: %w", attrs.Verb, what, err)
	}
	return r.Status.Allowed, nil
}
