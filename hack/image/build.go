package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations on the index.json entry that name the image for an importer:
// containerd's `ctr images import` reads the first, OCI tools the second.
const (
	annotationContainerdName = "io.containerd.image.name"
	annotationRefName        = "org.opencontainers.image.ref.name"
)

// platform is one os/arch the image is built for.
type platform struct{ OS, Arch string }

func (p platform) String() string { return p.OS + "/" + p.Arch }

func parsePlatforms(s string) ([]platform, error) {
	var out []platform
	for _, f := range strings.Split(s, ",") {
		os, arch, ok := strings.Cut(strings.TrimSpace(f), "/")
		if !ok || os == "" || arch == "" {
			return nil, fmt.Errorf("platform %q: want os/arch, such as linux/amd64", f)
		}
		out = append(out, platform{os, arch})
	}
	return out, nil
}

// goBuild builds the main package pkg in module directory dir for p into
// out: static (CGO_ENABLED=0), -trimpath, no VCS stamp, and only the ldflags
// given, so the same sources and toolchain give the same bytes.
func goBuild(ctx context.Context, dir, pkg string, p platform, ldflags, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s for %s: %w: %s", pkg, p, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// file is one entry of an image layer.
type file struct {
	Name string // relative, without a leading slash
	Mode int64
	Dir  bool
	Data []byte
}

// layerTar returns a tar of files in name order, owned by 0:0, with every
// mtime at epoch: the same files give the same bytes.
func layerTar(files []file, epoch time.Time) ([]byte, error) {
	sorted := append([]file(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i, f := range sorted {
		if i > 0 && sorted[i-1].Name == f.Name {
			return nil, fmt.Errorf("layer: %s twice", f.Name)
		}
		hdr := &tar.Header{
			Name:    f.Name,
			Mode:    f.Mode,
			ModTime: epoch,
			Format:  tar.FormatPAX,
		}
		if f.Dir {
			hdr.Typeflag = tar.TypeDir
			hdr.Name = strings.TrimSuffix(f.Name, "/") + "/"
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(f.Data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// imageSpec is a single-layer image on an empty base.
type imageSpec struct {
	Platform   platform
	Files      []file
	Entrypoint []string
	Labels     map[string]string
	Epoch      time.Time
}

// newImage builds spec as an OCI image: one layer, nothing pulled.
func newImage(spec imageSpec) (v1.Image, error) {
	b, err := layerTar(spec.Files, spec.Epoch)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: spec.Epoch}, CreatedBy: "hack/image", Comment: "built from the kubectl-dkc repository"},
	})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = spec.Platform.OS, spec.Platform.Arch
	cfg.Created = v1.Time{Time: spec.Epoch}
	cfg.Config.Entrypoint = spec.Entrypoint
	cfg.Config.Labels = spec.Labels
	cfg.Config.User = "0:0"
	return mutate.ConfigFile(img, cfg)
}

// newIndex puts one image per platform into an OCI image index.
func newIndex(images map[platform]v1.Image, platforms []platform) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var adds []mutate.IndexAddendum
	for _, p := range platforms {
		img, ok := images[p]
		if !ok {
			return nil, fmt.Errorf("index: no image for %s", p)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: p.OS, Architecture: p.Arch},
		}})
	}
	return mutate.AppendManifests(idx, adds...), nil
}

// writeArchive writes idx as an OCI image layout in a tar at path, with one
// entry in index.json named ref. The tar is deterministic, as the layers.
func writeArchive(path string, idx v1.ImageIndex, ref string, epoch time.Time) error {
	dir, err := os.MkdirTemp("", "dkc-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("oci layout: %w", err)
	}
	tag := ref
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		tag = ref[i+1:]
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		annotationContainerdName: ref,
		annotationRefName:        tag,
	})); err != nil {
		return fmt.Errorf("oci layout: %w", err)
	}
	var files []file
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			files = append(files, file{Name: filepath.ToSlash(rel), Mode: 0o755, Dir: true})
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, file{Name: filepath.ToSlash(rel), Mode: 0o644, Data: b})
		return nil
	})
	if err != nil {
		return err
	}
	b, err := layerTar(files, epoch)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
