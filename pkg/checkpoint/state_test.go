package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A store written in the older layout (a kubelet's, or an older dkc's) is
// adopted: the record is built from the older meta files, the error
// belonging to the assigned config.
func TestStateAdoptsOlderLayout(t *testing.T) {
	s, _, _ := newStore(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.SetLastKnownGood(source("uid-a", "1")))
	must(s.SetAssigned(source("uid-b", "2")))
	must(s.SetLastError("failed to validate config, see Kubelet log for details: x"))

	st, adopted, err := s.State()
	must(err)
	if !adopted {
		t.Errorf("adopted = false for a store without a record")
	}
	at := t0.UTC()
	want := State{
		Assigned: source("uid-b", "2"), AssignedAt: &at, LastKnownGood: source("uid-a", "1"),
		Error: "failed to validate config, see Kubelet log for details: x", ErrorSource: source("uid-b", "2"),
		Active: source("uid-a", "1"),
	}
	if d := cmp.Diff(want, st); d != "" {
		t.Errorf("adopted record (-want +got):\n%s", d)
	}
	if !st.Failed() || st.Target().ConfigMap.UID != "uid-a" {
		t.Errorf("adopted record: failed %v, target %v; want failed, target uid-a", st.Failed(), st.Target())
	}
}

// SetState writes the record and derives upstream's meta files from it, in
// upstream's format; the record wins over them.
func TestSetStateDerivesUpstreamFiles(t *testing.T) {
	s, _, _ := newStore(t)
	at := t0.Add(time.Minute)
	st := State{Assigned: source("uid-c", "3"), AssignedAt: &at, LastKnownGood: source("uid-a", "1"), Active: source("uid-c", "3"),
		Error: "an error of another config", ErrorSource: source("uid-b", "2")}
	if err := s.SetState(st); err != nil {
		t.Fatal(err)
	}
	got, adopted, err := s.State()
	if err != nil || adopted {
		t.Fatalf("State = adopted %v, %v; want the record", adopted, err)
	}
	if d := cmp.Diff(st, got); d != "" {
		t.Errorf("record (-want +got):\n%s", d)
	}
	assigned, err := s.Assigned()
	if err != nil || assigned.ConfigMap.UID != "uid-c" {
		t.Errorf("meta/assigned = %v, %v; want uid-c", assigned, err)
	}
	raw, err := os.ReadFile(filepath.Join(s.Dir(), "meta", "assigned"))
	if err != nil || !strings.Contains(string(raw), "kind: SerializedNodeConfigSource") || !strings.Contains(string(raw), "apiVersion: kubelet.config.k8s.io/v1beta1") {
		t.Errorf("meta/assigned is not upstream's format:\n%s", raw)
	}
	lkg, err := s.LastKnownGood()
	if err != nil || lkg.ConfigMap.UID != "uid-a" {
		t.Errorf("meta/last-known-good = %v, %v; want uid-a", lkg, err)
	}
	// The error belongs to another config: the older layout has none.
	if msg, err := s.LastError(); err != nil || msg != "" {
		t.Errorf("meta/last-error = %q, %v; want none", msg, err)
	}
	if got.Failed() {
		t.Errorf("Failed() = true for an error of another config")
	}
}

// The decodes of meta/state and the legacy meta files are memoized by the
// files' bytes: what a caller changes in a record it read does not reach
// the next read, and bytes written behind the store's back (another
// writer, a restore from backup) are decoded afresh, never answered from
// the memo.
func TestStateMemoFollowsTheFile(t *testing.T) {
	s, _, _ := newStore(t)
	at := t0.Add(time.Minute).UTC()
	if err := s.SetState(State{Assigned: source("uid-a", "1"), AssignedAt: &at, Active: source("uid-a", "1")}); err != nil {
		t.Fatal(err)
	}
	st, _, err := s.State()
	if err != nil {
		t.Fatal(err)
	}
	st.Assigned.ConfigMap.UID = "changed-by-caller"
	*st.AssignedAt = t0
	again, _, err := s.State()
	if err != nil {
		t.Fatal(err)
	}
	if again.Assigned.ConfigMap.UID != "uid-a" || !again.AssignedAt.Equal(at) {
		t.Errorf("State after a caller changed its copy = %v at %v; want uid-a at %v", again.Assigned.ConfigMap.UID, again.AssignedAt, at)
	}
	lkg, err := s.LastKnownGood()
	if err != nil || lkg != nil {
		t.Fatalf("LastKnownGood = %v, %v; want the local config", lkg, err)
	}

	// Another record, and another last-known-good, written behind the
	// store's back.
	other := storeWith(t, State{Assigned: source("uid-b", "2"), Active: source("uid-b", "2"), LastKnownGood: source("uid-b", "2")})
	for _, name := range []string{"state", "last-known-good"} {
		data, err := os.ReadFile(filepath.Join(other.Dir(), "meta", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(s.Dir(), "meta", name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	st, _, err = s.State()
	if err != nil || st.Assigned.ConfigMap.UID != "uid-b" {
		t.Errorf("State after meta/state changed on disk = %v, %v; want uid-b", st.Assigned, err)
	}
	if lkg, err := s.LastKnownGood(); err != nil || lkg == nil || lkg.ConfigMap.UID != "uid-b" {
		t.Errorf("LastKnownGood after the file changed on disk = %v, %v; want uid-b", lkg, err)
	}

	// A corrupt file is an error, memo or not.
	if err := os.WriteFile(filepath.Join(s.Dir(), "meta", "state"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.State(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("State of a corrupt meta/state: %v; want ErrCorrupt", err)
	}
}

// storeWith opens a store in a new directory holding the record st.
func storeWith(t *testing.T, st State) *Store {
	t.Helper()
	s, _, _ := newStore(t)
	if err := s.SetState(st); err != nil {
		t.Fatal(err)
	}
	return s
}
