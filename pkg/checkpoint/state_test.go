package checkpoint

import (
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
