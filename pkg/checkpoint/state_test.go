package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-dkc/dkc/pkg/checkpoint/checkpointtest"
)

// A store written in the older layout (a kubelet's, or an older dkc's) is
// adopted: the record is built from the older meta files, the error
// belonging to the assigned config.
func TestStateAdoptsOlderLayout(t *testing.T) {
	s, dir, _ := newStore(t)
	at := t0.UTC()
	checkpointtest.Write(t, dir, checkpointtest.Layout{
		Assigned: source("uid-b", "2"), AssignedAt: &at, LastKnownGood: source("uid-a", "1"),
		LastError: "failed to validate config, see Kubelet log for details: x",
	})

	st, adopted, err := s.State()
	if err != nil {
		t.Fatal(err)
	}
	if !adopted {
		t.Errorf("adopted = false for a store without a record")
	}
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
	s, dir, _ := newStore(t)
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
	older := readOlder(t, dir)
	if older.Assigned == nil || older.Assigned.ConfigMap.UID != "uid-c" {
		t.Errorf("meta/assigned = %v; want uid-c", older.Assigned)
	}
	raw, err := os.ReadFile(filepath.Join(s.Dir(), "meta", "assigned"))
	if err != nil || !strings.Contains(string(raw), "kind: SerializedNodeConfigSource") || !strings.Contains(string(raw), "apiVersion: kubelet.config.k8s.io/v1beta1") {
		t.Errorf("meta/assigned is not upstream's format:\n%s", raw)
	}
	if older.LastKnownGood == nil || older.LastKnownGood.ConfigMap.UID != "uid-a" {
		t.Errorf("meta/last-known-good = %v; want uid-a", older.LastKnownGood)
	}
	// The error belongs to another config: the older layout has none.
	if older.LastError != "" {
		t.Errorf("meta/last-error = %q; want none", older.LastError)
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
	s, dir, _ := newStore(t)
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
	// SetState read meta/last-known-good, the local config, before it
	// left it as it was.
	if lkg := readOlder(t, dir).LastKnownGood; lkg != nil {
		t.Fatalf("meta/last-known-good = %v; want the local config", lkg)
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
	// Without the record, State adopts meta/last-known-good as it is now.
	if err := os.Remove(filepath.Join(s.Dir(), "meta", "state")); err != nil {
		t.Fatal(err)
	}
	if st, adopted, err := s.State(); err != nil || !adopted || st.LastKnownGood == nil || st.LastKnownGood.ConfigMap.UID != "uid-b" {
		t.Errorf("adopted last-known-good after the file changed on disk = %v, %v; want uid-b", st.LastKnownGood, err)
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
