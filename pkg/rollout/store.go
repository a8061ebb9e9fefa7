package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

var (
	// ErrNotFound means no rollout of that name exists.
	ErrNotFound = errors.New("rollout not found")
	// ErrConflict means another client changed the rollout since it was
	// read; read it again and retry.
	ErrConflict = errors.New("rollout changed by another client")
	// ErrExists means a rollout of that name exists already.
	ErrExists = errors.New("it exists already")
	// ErrNoCRD means the cluster does not serve NodeConfigRollouts:
	// deploy/crds.yaml is not installed.
	ErrNoCRD = errors.New("the cluster does not serve nodeconfigrollouts.kubectl-dkc.io: install dkc with kubectl dkc install (docs/install.md)")
)

// Store reads and writes the NodeConfigRollouts of Namespace. UpdateStatus
// carries the resourceVersion it read, so a client that lost a race gets
// ErrConflict instead of overwriting the winner.
type Store struct {
	Client    dynamic.Interface
	Namespace string
}

func (s *Store) resource() dynamic.ResourceInterface {
	return s.Client.Resource(Resource).Namespace(s.Namespace)
}

// Encode returns r as an unstructured object, as the apiserver takes it.
func Encode(r *Rollout) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode rollout %q: %w", r.Name, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return nil, fmt.Errorf("encode rollout %q: %w", r.Name, err)
	}
	return u, nil
}

// Decode reads a Rollout out of an unstructured NodeConfigRollout.
func Decode(u *unstructured.Unstructured) (*Rollout, error) {
	data, err := u.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("nodeconfigrollout %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	r := &Rollout{}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("nodeconfigrollout %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return r, nil
}

// wrap names op and rollout name in err, and maps the errors callers act on.
func wrap(err error, op, name string) error {
	switch {
	case apierrors.IsConflict(err):
		return fmt.Errorf("%s rollout %q: %w", op, name, ErrConflict)
	case isNoCRD(err):
		return fmt.Errorf("%s rollout %q: %w", op, name, ErrNoCRD)
	}
	return fmt.Errorf("%s rollout %q: %w", op, name, err)
}

// isNoCRD reports whether err is the apiserver's answer for a resource it
// does not serve: a 404 that names no object.
func isNoCRD(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d == nil || d.Name == ""
}

// Create stores a new rollout; its status is left to the driver. With
// dryRun the apiserver checks it without storing it.
func (s *Store) Create(ctx context.Context, r *Rollout, dryRun bool) (*Rollout, error) {
	r = r.DeepCopy()
	r.Namespace = s.Namespace
	r.ResourceVersion = ""
	r.Status.Nodes = nil // the nodes carry their part
	u, err := Encode(r)
	if err != nil {
		return nil, err
	}
	opts := metav1.CreateOptions{FieldManager: source.FieldManager}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	got, err := s.resource().Create(ctx, u, opts)
	if apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create rollout %q: %w: choose another --name, or delete nodeconfigrollout %s -n %s", r.Name, ErrExists, r.Name, s.Namespace)
	}
	if err != nil {
		return nil, wrap(err, "create", r.Name)
	}
	return Decode(got)
}

// Get reads rollout name.
func (s *Store) Get(ctx context.Context, name string) (*Rollout, error) {
	u, err := s.resource().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && !isNoCRD(err) {
		return nil, fmt.Errorf("%w: %q in namespace %q (list them with kubectl get nodeconfigrollouts -n %s)", ErrNotFound, name, s.Namespace, s.Namespace)
	}
	if err != nil {
		return nil, wrap(err, "get", name)
	}
	return Decode(u)
}

// List returns every rollout in the namespace, newest first.
func (s *Store) List(ctx context.Context) ([]*Rollout, error) {
	list, err := s.resource().List(ctx, metav1.ListOptions{})
	if isNoCRD(err) {
		return nil, fmt.Errorf("list rollouts: %w", ErrNoCRD)
	}
	if err != nil {
		return nil, fmt.Errorf("list rollouts: %w", err)
	}
	var out []*Rollout
	for i := range list.Items {
		r, err := Decode(&list.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	slices.SortStableFunc(out, func(a, b *Rollout) int {
		if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// Latest returns the newest rollout, or ErrNotFound.
func (s *Store) Latest(ctx context.Context) (*Rollout, error) {
	all, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("%w: no rollout in namespace %q (start one with kubectl dkc rollout start)", ErrNotFound, s.Namespace)
	}
	return all[0], nil
}

// UpdateStatus writes r's status, on the condition that nobody wrote the
// rollout since r was read (r.ResourceVersion); else it returns an error
// matching ErrConflict. Only a rollout's driver writes its status.
func (s *Store) UpdateStatus(ctx context.Context, r *Rollout) (*Rollout, error) {
	r = r.DeepCopy()
	r.Status.LastUpdate = metav1.Now()
	r.Status.Nodes = nil // the nodes carry their part
	u, err := Encode(r)
	if err != nil {
		return nil, err
	}
	got, err := s.resource().UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: source.FieldManager})
	if err != nil {
		return nil, wrap(err, "update", r.Name)
	}
	return Decode(got)
}

// Request asks rollout name's driver for state to (Paused, Running or
// Aborted), through the rollout's spec, when the rollout stands in one of
// the states in from (Rollout.State); it retries on conflicts. It returns
// the rollout as written, or an error that names the state it was in.
func (s *Store) Request(ctx context.Context, name string, to State, from ...State) (*Rollout, error) {
	var got *Rollout
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r, err := s.Get(ctx, name)
		if err != nil {
			return err
		}
		got = r
		st := r.State()
		if st == to {
			return nil
		}
		if !slices.Contains(from, st) {
			return fmt.Errorf("rollout %q is %s: it can be made %s only from %s", name, st, to, joinStates(from))
		}
		spec := map[string]any{}
		switch to {
		case Paused:
			spec["paused"] = true
		case Running:
			spec["paused"] = false
		case Aborted:
			spec["aborted"] = true
		default:
			return fmt.Errorf("rollout %q: a client cannot ask for state %s", name, to)
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": r.ResourceVersion},
			"spec":     spec,
		})
		if err != nil {
			return err
		}
		u, err := s.resource().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: source.FieldManager})
		if err != nil {
			return err
		}
		got, err = Decode(u)
		return err
	})
	if apierrors.IsConflict(err) || errors.Is(err, ErrConflict) {
		return got, wrap(err, "update", name)
	}
	return got, err
}

func joinStates(states []State) string {
	out := make([]string, len(states))
	for i, s := range states {
		out[i] = string(s)
	}
	return strings.Join(out, " or ")
}
