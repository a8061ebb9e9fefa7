package install

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// What Apply did to an object.
const (
	Created    = "created"
	Configured = "configured"
	Unchanged  = "unchanged"
	// Applied is a server-side dry run's: the apiserver accepted the
	// object and stored nothing.
	Applied = "serverside-applied"
)

// crdGVR is the resource of CustomResourceDefinitions.
var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// EstablishTimeout bounds the wait for a CRD to be served.
const EstablishTimeout = time.Minute

// Applier applies objects server-side, as source.FieldManager.
type Applier struct {
	Dynamic dynamic.Interface
	Mapper  meta.RESTMapper
	// Force takes over fields that another manager owns
	// (--force-conflicts); without it such a conflict is an error.
	Force bool
	// DryRun sends every request as a server-side dry run.
	DryRun bool
}

// ApplyAll applies objs: the CustomResourceDefinitions first, then, once
// the apiserver serves them (Established), the rest in their order. report
// hears of each object as it is applied, with what Apply did.
func (a *Applier) ApplyAll(ctx context.Context, objs []*unstructured.Unstructured, report func(obj *unstructured.Unstructured, outcome string) error) error {
	var crds, rest []*unstructured.Unstructured
	for _, obj := range objs {
		if obj.GroupVersionKind().GroupKind() == (schema.GroupKind{Group: crdGVR.Group, Kind: "CustomResourceDefinition"}) {
			crds = append(crds, obj)
		} else {
			rest = append(rest, obj)
		}
	}
	apply := func(objs []*unstructured.Unstructured) error {
		for _, obj := range objs {
			got, outcome, err := a.Apply(ctx, obj)
			if err != nil {
				return err
			}
			if err := report(got, outcome); err != nil {
				return err
			}
		}
		return nil
	}
	if err := apply(crds); err != nil {
		return err
	}
	if !a.DryRun {
		for _, crd := range crds {
			if err := a.waitEstablished(ctx, crd.GetName()); err != nil {
				return err
			}
		}
	}
	return apply(rest)
}

// Apply applies obj and says whether that created it, changed it, or
// left it as it was (its resourceVersion did not move).
func (a *Applier) Apply(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, string, error) {
	ri, err := a.resource(obj)
	if err != nil {
		return nil, "", err
	}
	before, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		before = nil
	case err != nil:
		return nil, "", fmt.Errorf("read %s: %w", describe(obj), err)
	}
	opts := metav1.ApplyOptions{FieldManager: source.FieldManager, Force: a.Force}
	if a.DryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	got, err := ri.Apply(ctx, obj.GetName(), obj, opts)
	if err != nil {
		if apierrors.IsConflict(err) && !a.Force {
			return nil, "", fmt.Errorf("apply %s: %w (another field manager owns these fields: apply again with --force-conflicts to take them over)", describe(obj), err)
		}
		return nil, "", fmt.Errorf("apply %s: %w", describe(obj), err)
	}
	switch {
	case a.DryRun:
		return got, Applied, nil
	case before == nil:
		return got, Created, nil
	case before.GetResourceVersion() == got.GetResourceVersion():
		return got, Unchanged, nil
	}
	return got, Configured, nil
}

// Resource returns the dynamic client of obj's resource, in its namespace
// when it has one.
func (a *Applier) resource(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	m, err := a.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s: the apiserver does not serve %s: %w", describe(obj), gvk.GroupVersion(), err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return a.Dynamic.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
	}
	return a.Dynamic.Resource(m.Resource), nil
}

// waitEstablished waits until the CRD name is Established: the apiserver
// serves its resource.
func (a *Applier) waitEstablished(ctx context.Context, name string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, EstablishTimeout, true, func(ctx context.Context) (bool, error) {
		crd, err := a.Dynamic.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conds {
			c, _ := c.(map[string]any)
			if c["type"] == "Established" {
				if c["status"] == "True" {
					return true, nil
				}
				last = fmt.Sprintf("Established=%v: %v", c["status"], c["message"])
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("customresourcedefinition %s is not established after %s: %s: %w", name, EstablishTimeout, last, err)
	}
	return nil
}

// describe names obj as kubectl does: kind.group/name, and its namespace.
func describe(obj *unstructured.Unstructured) string {
	gk := obj.GroupVersionKind().GroupKind()
	s := gk.String() + "/" + obj.GetName()
	if gk.Group == "" {
		s = gk.Kind + "/" + obj.GetName()
	}
	if ns := obj.GetNamespace(); ns != "" {
		s += " in namespace " + ns
	}
	return s
}
