package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-dkc/dkc/pkg/nodehealth"
)

// stateFile is the agent's record, meta/state.
const stateFile = "state"

// Kind and APIVersion of the record in meta/state.
const (
	StateKind       = "AgentState"
	StateAPIVersion = "kubectl-dkc.io/v1alpha1"
)

// State is the agent's record of what it believes the kubelet runs, kept in
// one file, meta/state, written atomically: a crash leaves the old record or
// the new one. It is the agent's truth for its intent. What the kubelet runs
// is in the kubelet's config file; the agent compares the two on every sync.
//
// A nil source means the node's local config.
type State struct {
	// Assigned is the assignment the agent applied or is applying.
	Assigned *corev1.NodeConfigSource `json:"assigned,omitempty"`
	// AssignedAt is the start of Assigned's last-known-good trial.
	AssignedAt *time.Time `json:"assignedAt,omitempty"`
	// Active is the config the agent last wrote to the kubelet's config
	// file (recorded after the write).
	Active *corev1.NodeConfigSource `json:"active,omitempty"`
	// LastKnownGood is the config to fall back to.
	LastKnownGood *corev1.NodeConfigSource `json:"lastKnownGood,omitempty"`
	// Error is the status error of ErrorSource, a config that failed on
	// the kubelet (its health gate) and must not be put back.
	Error       string                   `json:"error,omitempty"`
	ErrorSource *corev1.NodeConfigSource `json:"errorSource,omitempty"`
	// Baseline is what the node ran before the kubelet restarted on
	// Assigned: its trial holds the node to it. Nil when Assigned needed
	// no restart, or once its trial ended.
	Baseline *nodehealth.Baseline `json:"baseline,omitempty"`
}

// Failed reports whether the assigned config failed on the kubelet: the
// recorded error belongs to it.
func (s State) Failed() bool {
	return s.Error != "" && s.Assigned != nil && sameSource(s.ErrorSource, s.Assigned)
}

// Target is the config the kubelet should run: the assigned one, or the
// last-known-good one when the assigned one failed.
func (s State) Target() *corev1.NodeConfigSource {
	if s.Failed() {
		return s.LastKnownGood
	}
	return s.Assigned
}

// AssignedError is Error if it belongs to the assigned config, else "".
func (s State) AssignedError() string {
	if s.Failed() {
		return s.Error
	}
	return ""
}

func sameSource(a, b *corev1.NodeConfigSource) bool { return reflect.DeepEqual(a, b) }

// DeepCopy returns a copy of s that shares nothing with it.
func (s State) DeepCopy() State {
	c := s
	c.Assigned = s.Assigned.DeepCopy()
	c.Active = s.Active.DeepCopy()
	c.LastKnownGood = s.LastKnownGood.DeepCopy()
	c.ErrorSource = s.ErrorSource.DeepCopy()
	c.Baseline = s.Baseline.DeepCopy()
	if s.AssignedAt != nil {
		at := *s.AssignedAt
		c.AssignedAt = &at
	}
	return c
}

// stateFileContent is meta/state on disk.
type stateFileContent struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	State      `json:",inline"`
}

// State returns the agent's record. A store without one (written by a
// kubelet's own DKC, or by an older dkc) is adopted: the record is built from
// meta/assigned, meta/last-known-good, meta/assigned-at and meta/last-error,
// with the last error belonging to the assigned config and Active the config
// that store says the kubelet runs; adopted is true then, and the caller
// records it with SetState.
func (s *Store) State() (st State, adopted bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state()
}

func (s *Store) state() (State, bool, error) {
	path := filepath.Join(s.metaDir(), stateFile)
	data, err := os.ReadFile(path)
	if err == nil {
		st, err := s.record.get(data, decodeState, State.DeepCopy)
		if err != nil {
			return State{}, false, fmt.Errorf("meta file %q: %w: %w", path, ErrCorrupt, err)
		}
		return st, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return State{}, false, fmt.Errorf("meta file %q: %w", path, err)
	}
	var st State
	if st.Assigned, err = s.readSource(assignedFile); err != nil {
		return State{}, false, err
	}
	if st.LastKnownGood, err = s.readSource(lastKnownGoodFile); err != nil {
		return State{}, false, err
	}
	if at, ok, err := s.assignedAt(); err != nil {
		return State{}, false, err
	} else if ok && st.Assigned != nil {
		st.AssignedAt = &at
	}
	lastErr, err := s.lastError()
	if err != nil {
		return State{}, false, err
	}
	if lastErr != "" && st.Assigned != nil {
		st.Error, st.ErrorSource = lastErr, st.Assigned.DeepCopy()
	}
	st.Active = st.Target().DeepCopy()
	return st, true, nil
}

func decodeState(data []byte) (State, error) {
	var c stateFileContent
	if err := json.Unmarshal(data, &c); err != nil {
		return State{}, err
	}
	if c.Kind != StateKind || c.APIVersion != StateAPIVersion {
		return State{}, fmt.Errorf("got kind %q apiVersion %q, want kind %q apiVersion %q", c.Kind, c.APIVersion, StateKind, StateAPIVersion)
	}
	for name, src := range map[string]*corev1.NodeConfigSource{"assigned": c.Assigned, "active": c.Active, "lastKnownGood": c.LastKnownGood, "errorSource": c.ErrorSource} {
		if err := validateAssignable(src); err != nil {
			return State{}, fmt.Errorf("%s: %w", name, err)
		}
	}
	return c.State, nil
}

func encodeState(st State) ([]byte, error) {
	data, err := json.MarshalIndent(stateFileContent{Kind: StateKind, APIVersion: StateAPIVersion, State: st}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// SetState records st in meta/state, atomically and durably, and then
// derives upstream's meta/assigned and meta/last-known-good (and dkc's older
// meta/assigned-at and meta/last-error) from it, so that a kubelet's DKC
// code or an older dkc reads the same intent. A crash between the two leaves
// the derived files behind the record, which wins.
func (s *Store) SetState(st State) error {
	for name, src := range map[string]*corev1.NodeConfigSource{"assigned": st.Assigned, "active": st.Active, "lastKnownGood": st.LastKnownGood, "errorSource": st.ErrorSource} {
		if err := validateAssignable(src); err != nil {
			return fmt.Errorf("meta file %q: %s: %w", stateFile, name, err)
		}
	}
	if st.AssignedAt != nil {
		at := st.AssignedAt.UTC()
		st.AssignedAt = &at
	}
	data, err := encodeState(st)
	if err != nil {
		return fmt.Errorf("meta file %q: %w", stateFile, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	path := filepath.Join(s.metaDir(), stateFile)
	if old, err := os.ReadFile(path); err != nil || string(old) != string(data) {
		if err := s.writeAtomic(path, data); err != nil {
			return fmt.Errorf("meta file %q: %w", stateFile, err)
		}
		s.record.set(data, st.DeepCopy())
	}
	return s.deriveLegacy(st)
}

// deriveLegacy writes the meta files of the older layout that differ from
// st.
func (s *Store) deriveLegacy(st State) error {
	for _, f := range []struct {
		name string
		src  *corev1.NodeConfigSource
	}{{assignedFile, st.Assigned}, {lastKnownGoodFile, st.LastKnownGood}} {
		cur, err := s.readSource(f.name)
		if err == nil && sameSource(cur, f.src) {
			continue
		}
		if err := s.writeSource(f.name, f.src); err != nil {
			return err
		}
	}
	at := ""
	if st.AssignedAt != nil {
		at = st.AssignedAt.UTC().Format(time.RFC3339Nano) + "\n"
	}
	for _, f := range []struct{ name, content string }{{assignedAtFile, at}, {lastErrorFile, st.AssignedError()}} {
		path := filepath.Join(s.metaDir(), f.name)
		old, err := os.ReadFile(path)
		switch {
		case f.content == "" && errors.Is(err, fs.ErrNotExist):
			continue
		case err == nil && string(old) == f.content && f.content != "":
			continue
		case f.content == "":
			if err := s.fsys.Remove(path); err != nil {
				return fmt.Errorf("meta file %q: %w", f.name, err)
			}
			if err := s.fsys.SyncDir(s.metaDir()); err != nil {
				return fmt.Errorf("meta file %q: %w", f.name, err)
			}
		default:
			if err := s.writeAtomic(path, []byte(f.content)); err != nil {
				return fmt.Errorf("meta file %q: %w", f.name, err)
			}
		}
	}
	return nil
}

// referenced returns the checkpoints st names, which GC keeps.
func referenced(st State) map[string]bool {
	keep := map[string]bool{}
	for _, src := range []*corev1.NodeConfigSource{st.Assigned, st.Active, st.LastKnownGood} {
		if src != nil && src.ConfigMap != nil {
			keep[checkpointID(types.UID(src.ConfigMap.UID), src.ConfigMap.ResourceVersion)] = true
		}
	}
	return keep
}
