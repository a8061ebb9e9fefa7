package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func TestLayerTar(t *testing.T) {
	epoch := time.Unix(1700000000, 0)
	files := []file{
		{Name: "tmp", Mode: 0o1777, Dir: true},
		{Name: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0::/:/sbin/nologin\n")},
		{Name: "etc", Mode: 0o755, Dir: true},
	}
	b, err := layerTar(files, epoch)
	if err != nil {
		t.Fatal(err)
	}
	type entry struct {
		Name     string
		Mode     int64
		UID, GID int
		ModTime  int64
	}
	var got []entry
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, entry{h.Name, h.Mode, h.Uid, h.Gid, h.ModTime.Unix()})
	}
	want := []entry{
		{"etc/", 0o755, 0, 0, 1700000000},
		{"etc/passwd", 0o644, 0, 0, 1700000000},
		{"tmp/", 0o1777, 0, 0, 1700000000},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	// The order of the input does not matter.
	again, err := layerTar([]file{files[2], files[0], files[1]}, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, again) {
		t.Error("layerTar depends on the order of its input")
	}
	if _, err := layerTar([]file{files[0], files[0]}, epoch); err == nil {
		t.Error("layerTar accepted a name twice")
	}
}

// TestReproducible builds each image twice, as `make image` does, and wants
// the same archive bytes, hence the same digest; then it checks what the
// index holds. The pause and probe images, small programs of the standard
// library, are built for two platforms, which tests the index of a
// release; the agent only for this machine's, because for another one
// every package of its dependencies would compile again (make release
// builds it for both).
func TestReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the agent")
	}
	ctx := context.Background()
	platforms := map[string][]string{
		"pause": {"linux/amd64", "linux/arm64"},
		"probe": {"linux/amd64", "linux/arm64"},
		"agent": {"linux/" + runtime.GOARCH},
	}
	for _, kind := range []string{"pause", "probe", "agent"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			o := options{Kind: kind, Root: "../..", Version: "v0.1.0-test", Commit: "0123456", Epoch: 1700000000,
				Platforms: strings.Join(platforms[kind], ",")}
			var digests []v1.Hash
			var sums [][32]byte
			for i := range 2 {
				o.Out = filepath.Join(dir, kind+string(rune('a'+i))+".oci.tar")
				o.Ref = defaultRef(kind, o.Version)
				d, err := build(ctx, o)
				if err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(o.Out)
				if err != nil {
					t.Fatal(err)
				}
				digests = append(digests, d)
				sums = append(sums, sha256.Sum256(b))
			}
			if digests[0] != digests[1] {
				t.Errorf("two builds gave two digests: %s and %s", digests[0], digests[1])
			}
			if sums[0] != sums[1] {
				t.Errorf("two builds gave two archives: %x and %x", sums[0], sums[1])
			}
			t.Logf("%s index digest %s", kind, digests[0])
			checkArchive(t, o.Out, kind, platforms[kind])
		})
	}
}

// checkArchive opens the archive as an OCI layout and checks its name, its
// platforms (want), entrypoints and timestamps.
func checkArchive(t *testing.T, path, kind string, want []string) {
	t.Helper()
	idx, archived, err := openArchive(path, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wantName := map[string]string{"pause": DefaultPauseRef, "probe": DefaultProbeRef, "agent": DefaultAgentRepo + ":v0.1.0-test"}[kind]
	if archived != wantName {
		t.Errorf("image name %q, want %q", archived, wantName)
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range manifest.Manifests {
		platforms = append(platforms, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		_, _, agentEntry := dkcBinary("../..", "agent")
		wantEntry := map[string][]string{"pause": {"/pause"}, "probe": {"/probe"}, "agent": agentEntry}[kind]
		if diff := cmp.Diff(wantEntry, cfg.Config.Entrypoint); diff != "" {
			t.Errorf("%s entrypoint (-want +got):\n%s", d.Platform, diff)
		}
		if cfg.Architecture != d.Platform.Architecture || cfg.OS != d.Platform.OS {
			t.Errorf("%s: config says %s/%s", d.Platform, cfg.OS, cfg.Architecture)
		}
		if got := cfg.Created.Unix(); got != 1700000000 {
			t.Errorf("%s: created %d, want the epoch", d.Platform, got)
		}
	}
	if diff := cmp.Diff(want, platforms); diff != "" {
		t.Errorf("platforms (-want +got):\n%s", diff)
	}
}
