package util

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util/utiltest"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

func TestCheckAuthority(t *testing.T) {
	use := func(class string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Group: "kubectl-dkc.io", Resource: "unsafeclasses", Name: class, Verb: "use"}
	}
	evict := authorizationv1.ResourceAttributes{Resource: "pods", Subresource: "eviction", Verb: "create"}
	tests := map[string]struct {
		classes   []string
		drain     bool
		grant     func(a *authorizationv1.ResourceAttributes) bool
		wantAsked []authorizationv1.ResourceAttributes
		wantErr   string
	}{
		"nothing to ask": {grant: func(*authorizationv1.ResourceAttributes) bool { return false }},
		"every class allowed": {
			classes: []string{"security", "host-access"}, drain: true,
			grant:     func(*authorizationv1.ResourceAttributes) bool { return true },
			wantAsked: []authorizationv1.ResourceAttributes{use("security"), use("host-access"), evict},
		},
		"a class denied": {
			classes:   []string{"security", "host-access"},
			grant:     func(a *authorizationv1.ResourceAttributes) bool { return a.Name == "host-access" },
			wantAsked: []authorizationv1.ResourceAttributes{use("security"), use("host-access")},
			wantErr:   source.UnsafeClassesDenied([]string{"security"}),
		},
		"classes and eviction denied": {
			classes: []string{"security", "host-access"}, drain: true,
			grant:     func(*authorizationv1.ResourceAttributes) bool { return false },
			wantAsked: []authorizationv1.ResourceAttributes{use("security"), use("host-access"), evict},
			wantErr:   source.UnsafeClassesDenied([]string{"security", "host-access"}) + "; " + source.EvictionDenied,
		},
		"eviction denied": {
			drain:     true,
			grant:     func(a *authorizationv1.ResourceAttributes) bool { return a.Resource != "pods" },
			wantAsked: []authorizationv1.ResourceAttributes{evict},
			wantErr:   source.EvictionDenied,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset()
			asked := utiltest.Authorize(client, tc.grant)
			err := CheckAuthority(context.Background(), client, tc.classes, tc.drain)
			got := ""
			if err != nil {
				got = err.Error()
				var denied *DeniedError
				if !errors.As(err, &denied) {
					t.Errorf("error %v is not a *DeniedError", err)
				}
			}
			if diff := cmp.Diff(tc.wantErr, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAsked, *asked); diff != "" {
				t.Errorf("reviews asked (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckAuthorityFailedReview(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("create", "selfsubjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	err := CheckAuthority(context.Background(), client, []string{"security"}, false)
	want := "selfsubjectaccessreview of use unsafeclasses security: connection refused"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

func TestValidateDigest(t *testing.T) {
	for d, want := range map[string]string{
		"":                         "",
		source.Digest([]byte("x")): "",
		source.ShortDigest(source.Digest([]byte("x"))): `invalid --digest "` + source.ShortDigest(source.Digest([]byte("x"))) + `": write the full digest, "sha256:" and 64 lowercase hex digits, as kubectl dkc push prints it`,
	} {
		got := ""
		if err := ValidateDigest(d); err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("ValidateDigest(%q) = %q, want %q", d, got, want)
		}
	}
}
