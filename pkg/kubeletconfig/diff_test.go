package kubeletconfig

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestNormalize(t *testing.T) {
	tests := map[string]struct {
		data    string
		want    string
		wantErr string
	}{
		"yaml keys are sorted at every level": {
			data: "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nevictionHard:\n  nodefs.available: 10%\n  memory.available: 100Mi\n",
			want: "apiVersion: kubelet.config.k8s.io/v1beta1\nevictionHard:\n  memory.available: 100Mi\n  nodefs.available: 10%\nkind: KubeletConfiguration\n",
		},
		"json becomes yaml": {
			data: `{"maxPods":110,"enforceNodeAllocatable":[],"clusterDNS":["10.0.0.10"],"failSwapOn":false}`,
			want: "clusterDNS:\n- 10.0.0.10\nenforceNodeAllocatable: []\nfailSwapOn: false\nmaxPods: 110\n",
		},
		"large integers keep their digits": {
			data: `{"big":9007199254740993,"float":0.1,"exp":1e3}`,
			want: "big: 9007199254740993\nexp: 1000\nfloat: 0.1\n",
		},
		"strings that look like other types stay strings": {
			data: "a: \"true\"\nb: \"10\"\nc: \"null\"\n",
			want: "a: \"true\"\nb: \"10\"\nc: \"null\"\n",
		},
		"broken yaml": {
			data:    "a: [\n",
			wantErr: "normalize: yaml: line 1: did not find expected node content",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Normalize([]byte(tc.data))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Normalize() error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Normalize() error: %v", err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("Normalize() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNormalizeIsStable(t *testing.T) {
	a := []byte(`{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1","maxPods":110}`)
	b := []byte("maxPods: 110\napiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
	na, err := Normalize(a)
	if err != nil {
		t.Fatal(err)
	}
	nb, err := Normalize(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(na), string(nb)); diff != "" {
		t.Errorf("JSON and YAML of the same config normalize differently (-json +yaml):\n%s", diff)
	}
	again, err := Normalize(na)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(na), string(again)); diff != "" {
		t.Errorf("Normalize() is not idempotent (-once +twice):\n%s", diff)
	}
}

// TestUnifiedDiff compares with golden files: testdata/<name>.a and .b are
// normalized, diffed, and compared with testdata/<name>.diff. Run
// `go test ./pkg/kubeletconfig -run TestUnifiedDiff -update` to rewrite them.
func TestUnifiedDiff(t *testing.T) {
	for _, name := range []string{"configz-edit", "far-apart", "close-together", "from-empty"} {
		t.Run(name, func(t *testing.T) {
			base := filepath.Join("testdata", name)
			a, b := readNormalized(t, base+".a"), readNormalized(t, base+".b")
			got := UnifiedDiff("node/a", "node/b", a, b)
			golden := base + ".diff"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("UnifiedDiff() mismatch with %s (-want +got):\n%s", golden, diff)
			}
		})
	}
}

// TestUnifiedDiffMatchesGNUDiff compares the golden cases, and two cases
// at the edge of merging hunks, with `diff -u` byte for byte.
func TestUnifiedDiffMatchesGNUDiff(t *testing.T) {
	diffCmd, err := exec.LookPath("diff")
	if err != nil {
		t.Skip("diff is not on PATH, so output cannot be compared with diff -u")
	}
	lines := func(f func(i int) string) []byte {
		var b strings.Builder
		for i := range 30 {
			b.WriteString(f(i) + "\n")
		}
		return []byte(b.String())
	}
	plain := lines(func(i int) string { return fmt.Sprintf("l%d", i) })
	changed := func(at ...int) []byte {
		return lines(func(i int) string {
			if slices.Contains(at, i) {
				return fmt.Sprintf("L%d", i)
			}
			return fmt.Sprintf("l%d", i)
		})
	}
	cases := map[string][2][]byte{
		"six unchanged lines between changes make one hunk":    {plain, changed(5, 12)},
		"seven unchanged lines between changes make two hunks": {plain, changed(5, 13)},
	}
	for _, name := range []string{"configz-edit", "far-apart", "close-together", "from-empty"} {
		base := filepath.Join("testdata", name)
		cases[name] = [2][]byte{readNormalized(t, base+".a"), readNormalized(t, base+".b")}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			if err := os.WriteFile(a, tc[0], 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(b, tc[1], 0o600); err != nil {
				t.Fatal(err)
			}
			// diff exits 1 when the files differ.
			want, _ := exec.Command(diffCmd, "-u", "--label", "node/a", "--label", "node/b", a, b).Output()
			got := UnifiedDiff("node/a", "node/b", tc[0], tc[1])
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("UnifiedDiff() differs from diff -u (-diff +got):\n%s", diff)
			}
		})
	}
}

func readNormalized(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) == 0 {
		return nil
	}
	n, err := Normalize(data)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestUnifiedDiffSmall(t *testing.T) {
	tests := map[string]struct {
		a, b string
		want string
	}{
		"equal": {
			a: "a\nb\n", b: "a\nb\n",
			want: "",
		},
		"both empty": {
			want: "",
		},
		"one line changed": {
			a: "a\n", b: "b\n",
			want: "--- x\n+++ y\n@@ -1 +1 @@\n-a\n+b\n",
		},
		"insert at the start": {
			a: "b\nc\n", b: "a\nb\nc\n",
			want: "--- x\n+++ y\n@@ -1,2 +1,3 @@\n+a\n b\n c\n",
		},
		"delete at the end": {
			a: "a\nb\nc\nd\ne\n", b: "a\nb\nc\nd\n",
			want: "--- x\n+++ y\n@@ -2,4 +2,3 @@\n b\n c\n d\n-e\n",
		},
		"to empty": {
			a: "a\nb\n", b: "",
			want: "--- x\n+++ y\n@@ -1,2 +0,0 @@\n-a\n-b\n",
		},
		"from empty": {
			a: "", b: "a\n",
			want: "--- x\n+++ y\n@@ -0,0 +1 @@\n+a\n",
		},
		"missing final newline": {
			a: "a\nb", b: "a\nb\n",
			want: "--- x\n+++ y\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := UnifiedDiff("x", "y", []byte(tc.a), []byte(tc.b))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("UnifiedDiff() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestUnifiedDiffAppliesBack checks that every hunk's lines rebuild both
// sides, on inputs with many scattered changes.
func TestUnifiedDiffAppliesBack(t *testing.T) {
	var a, b strings.Builder
	for i := range 200 {
		line := strings.Repeat("x", i%7) + "\n"
		a.WriteString(line)
		switch {
		case i%37 == 0:
			b.WriteString("changed\n")
		case i%53 == 0:
		default:
			b.WriteString(line)
		}
		if i%41 == 0 {
			b.WriteString("inserted\n")
		}
	}
	d := UnifiedDiff("a", "b", []byte(a.String()), []byte(b.String()))
	gotA, gotB := applyBack(t, d, a.String())
	if gotA != a.String() || gotB != b.String() {
		t.Errorf("diff does not rebuild its inputs:\n%s", d)
	}
}

// applyBack rebuilds both sides from a, using the hunks in d.
func applyBack(t *testing.T, d, a string) (string, string) {
	t.Helper()
	aLines := strings.SplitAfter(a, "\n")
	var rebuiltA, rebuiltB strings.Builder
	next := 0 // next line of a not yet copied
	for _, line := range strings.SplitAfter(d, "\n")[2:] {
		switch {
		case strings.HasPrefix(line, "@@ "):
			// "@@ -aStart[,aCount] +bStart[,bCount] @@"
			field := strings.Fields(line)[1]
			start, _, _ := strings.Cut(strings.TrimPrefix(field, "-"), ",")
			aStart, err := strconv.Atoi(start)
			if err != nil {
				t.Fatalf("bad hunk header %q: %v", line, err)
			}
			for ; next < aStart-1; next++ {
				rebuiltA.WriteString(aLines[next])
				rebuiltB.WriteString(aLines[next])
			}
		case strings.HasPrefix(line, " "):
			rebuiltA.WriteString(line[1:])
			rebuiltB.WriteString(line[1:])
			next++
		case strings.HasPrefix(line, "-"):
			rebuiltA.WriteString(line[1:])
			next++
		case strings.HasPrefix(line, "+"):
			rebuiltB.WriteString(line[1:])
		}
	}
	for ; next < len(aLines); next++ {
		rebuiltA.WriteString(aLines[next])
		rebuiltB.WriteString(aLines[next])
	}
	return rebuiltA.String(), rebuiltB.String()
}
