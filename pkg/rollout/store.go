package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

const (
	// Label marks the ConfigMaps that hold rollouts; its value is the
	// rollout's name.
	Label = source.Prefix + "rollout"
	// NamePrefix starts the name of a rollout's ConfigMap.
	NamePrefix = "dkc-rollout-"
	// SpecKey and StatusKey are the ConfigMap keys holding the JSON of a
	// Rollout's Spec and Status.
	SpecKey   = "spec"
	StatusKey = "status"
)

var (
	// ErrNotFound means no rollout of that name exists.
	ErrNotFound = errors.New("rollout not found")
	// ErrConflict means another client changed the rollout since it was
	// read; read it again and retry.
	ErrConflict = errors.New("rollout changed by another client")
)

// Store reads and writes rollouts, each in a ConfigMap named NamePrefix+name
// in Namespace. Update carries the resourceVersion it read, so a client
// that lost a race gets ErrConflict instead of overwriting the winner.
type Store struct {
	Client    kubernetes.Interface
	Namespace string
}

// ConfigMapName is the name of the ConfigMap that holds rollout name.
func ConfigMapName(name string) string { return NamePrefix + name }

// Encode returns r as its ConfigMap.
func Encode(r *Rollout) (*corev1.ConfigMap, error) {
	spec, err := json.Marshal(r.Spec)
	if err != nil {
		return nil, fmt.Errorf("encode rollout %q spec: %w", r.Name, err)
	}
	st, err := json.Marshal(r.Status)
	if err != nil {
		return nil, fmt.Errorf("encode rollout %q status: %w", r.Name, err)
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:            ConfigMapName(r.Name),
			Namespace:       r.Namespace,
			ResourceVersion: r.ResourceVersion,
			Labels:          map[string]string{Label: r.Name},
		},
		Data: map[string]string{SpecKey: string(spec), StatusKey: string(st)},
	}, nil
}

// Decode reads a Rollout out of its ConfigMap.
func Decode(cm *corev1.ConfigMap) (*Rollout, error) {
	name, ok := cm.Labels[Label]
	if !ok {
		name = strings.TrimPrefix(cm.Name, NamePrefix)
	}
	r := New(cm.Namespace, name, Spec{})
	r.ResourceVersion = cm.ResourceVersion
	r.CreationTimestamp = cm.CreationTimestamp
	r.UID = cm.UID
	if err := json.Unmarshal([]byte(cm.Data[SpecKey]), &r.Spec); err != nil {
		return nil, fmt.Errorf("configmap %s/%s: key %s: invalid JSON: %w", cm.Namespace, cm.Name, SpecKey, err)
	}
	if err := json.Unmarshal([]byte(cm.Data[StatusKey]), &r.Status); err != nil {
		return nil, fmt.Errorf("configmap %s/%s: key %s: invalid JSON: %w", cm.Namespace, cm.Name, StatusKey, err)
	}
	return r, nil
}

// Create stores a new rollout. With dryRun the apiserver checks it without
// storing it.
func (s *Store) Create(ctx context.Context, r *Rollout, dryRun bool) (*Rollout, error) {
	r = r.DeepCopy()
	r.Namespace = s.Namespace
	r.ResourceVersion = ""
	r.Status.LastUpdate = metav1.Now()
	cm, err := Encode(r)
	if err != nil {
		return nil, err
	}
	opts := metav1.CreateOptions{FieldManager: source.FieldManager}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	got, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Create(ctx, cm, opts)
	if apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create rollout %q: it exists already: choose another --name, or delete configmap %s/%s", r.Name, s.Namespace, cm.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("create rollout %q: %w", r.Name, err)
	}
	return Decode(got)
}

// Get reads rollout name.
func (s *Store) Get(ctx context.Context, name string) (*Rollout, error) {
	cm, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Get(ctx, ConfigMapName(name), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: %q in namespace %q (list them with kubectl get configmaps -n %s -l %s)", ErrNotFound, name, s.Namespace, s.Namespace, Label)
	}
	if err != nil {
		return nil, fmt.Errorf("get rollout %q: %w", name, err)
	}
	return Decode(cm)
}

// List returns every rollout in the namespace, newest first.
func (s *Store) List(ctx context.Context) ([]*Rollout, error) {
	list, err := s.Client.CoreV1().ConfigMaps(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: Label})
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

// Update writes r, on the condition that nobody wrote it since r was read
// (r.ResourceVersion); else it returns an error matching ErrConflict.
func (s *Store) Update(ctx context.Context, r *Rollout) (*Rollout, error) {
	r = r.DeepCopy()
	r.Status.LastUpdate = metav1.Now()
	cm, err := Encode(r)
	if err != nil {
		return nil, err
	}
	got, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Update(ctx, cm, metav1.UpdateOptions{FieldManager: source.FieldManager})
	if apierrors.IsConflict(err) {
		return nil, fmt.Errorf("update rollout %q: %w", r.Name, ErrConflict)
	}
	if err != nil {
		return nil, fmt.Errorf("update rollout %q: %w", r.Name, err)
	}
	return Decode(got)
}

// SetState moves rollout name to state to, from one of the states in from,
// retrying on conflicts. It returns the rollout as written, or an error that
// names the state it was in.
func (s *Store) SetState(ctx context.Context, name string, to State, reason string, from ...State) (*Rollout, error) {
	for {
		r, err := s.Get(ctx, name)
		if err != nil {
			return nil, err
		}
		if r.Status.State == to {
			return r, nil
		}
		if !slices.Contains(from, r.Status.State) {
			return r, fmt.Errorf("rollout %q is %s: it can be made %s only from %s", name, r.Status.State, to, joinStates(from))
		}
		r.Status.State, r.Status.Reason = to, reason
		got, err := s.Update(ctx, r)
		if errors.Is(err, ErrConflict) {
			continue
		}
		return got, err
	}
}

func joinStates(states []State) string {
	out := make([]string, len(states))
	for i, s := range states {
		out[i] = string(s)
	}
	return strings.Join(out, " or ")
}
