package atomicfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-dkc/dkc/pkg/atomicfile"
	"github.com/kubectl-dkc/dkc/pkg/atomicfile/atomicfiletest"
)

// A crash at any operation of WriteFile leaves the old content or the new
// one under the name, never a torn file; CleanTemps removes what is left.
func TestWriteFileCrashAtEveryOperation(t *testing.T) {
	count := &atomicfiletest.FaultFS{}
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteFile(count, path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantOps := []string{"create", "write", "chmod", "fsync", "close", "rename", "syncdir"}
	var gotOps []string
	for _, op := range count.Trace {
		gotOps = append(gotOps, strings.Fields(op)[0])
	}
	if d := cmp.Diff(wantOps, gotOps); d != "" {
		t.Errorf("operations (-want +got):\n%s", d)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("mode after replace = %v (%v), want the old file's 0640", fi.Mode().Perm(), err)
	}

	for k := 1; k <= len(wantOps); k++ {
		if err := os.WriteFile(path, []byte("old"), 0o640); err != nil {
			t.Fatal(err)
		}
		crash := &atomicfiletest.FaultFS{CrashAt: k}
		err := atomicfile.WriteFile(crash, path, []byte("new"), 0o600)
		if !errors.Is(err, atomicfiletest.ErrCrashed) {
			t.Fatalf("crash at %d: error %v, want ErrCrashed", k, err)
		}
		got, err := os.ReadFile(path)
		if err != nil || (string(got) != "old" && string(got) != "new") {
			t.Fatalf("crash at %d (%s): file holds %q (%v), want old or new", k, wantOps[k-1], got, err)
		}
		if err := atomicfile.CleanTemps(nil, dir); err != nil {
			t.Fatal(err)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			t.Fatalf("crash at %d: %d entries after CleanTemps, want only the file", k, len(entries))
		}
	}
}
