package pool

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// Store reads the NodeConfigPools of Namespace and writes their status.
type Store struct {
	Client    dynamic.Interface
	Namespace string
}

func (s *Store) resource() dynamic.ResourceInterface {
	return s.Client.Resource(Resource).Namespace(s.Namespace)
}

// Decode reads a Pool out of an unstructured NodeConfigPool.
func Decode(u *unstructured.Unstructured) (*Pool, error) {
	p := &Pool{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, p); err != nil {
		return nil, fmt.Errorf("nodeconfigpool %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return p, nil
}

// Encode returns p as an unstructured object.
func Encode(p *Pool) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		return nil, fmt.Errorf("encode nodeconfigpool %q: %w", p.Name, err)
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

// Get reads pool name.
func (s *Store) Get(ctx context.Context, name string) (*Pool, error) {
	u, err := s.resource().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get nodeconfigpool %q: %w", name, err)
	}
	return Decode(u)
}

// UpdateStatus writes p's status, on the condition that the pool did not
// change since p was read; a conflict is the apiserver's (retry on it).
func (s *Store) UpdateStatus(ctx context.Context, p *Pool) (*Pool, error) {
	u, err := Encode(p)
	if err != nil {
		return nil, err
	}
	got, err := s.resource().UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: source.FieldManager})
	if apierrors.IsNotFound(err) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("update nodeconfigpool %q status: %w", p.Name, err)
	}
	return Decode(got)
}

// SetConfig points pool name at src pinned by pin (its digest and allowed
// classes), on the condition that the pool is still at resourceVersion rv:
// `rollout undo --to-revision` goes back to an earlier revision's bytes.
func (s *Store) SetConfig(ctx context.Context, name, rv string, src *corev1.NodeConfigSource, pin *source.Pin) (*Pool, error) {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": rv},
		"spec": map[string]any{
			"configSource": src,
			"digest":       pin.Digest,
			"allowUnsafe":  pin.AllowUnsafe,
		},
	})
	if err != nil {
		return nil, err
	}
	u, err := s.resource().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: source.FieldManager})
	if err != nil {
		return nil, fmt.Errorf("update nodeconfigpool %q: %w", name, err)
	}
	return Decode(u)
}
