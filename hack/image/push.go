package main

import (
	"archive/tar"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// errPlainHTTP is returned for a plain-HTTP request to a registry that is
// not on loopback.
var errPlainHTTP = errors.New("plain HTTP is allowed only to a loopback registry (localhost, 127.0.0.0/8, ::1)")

// pushOptions are the flags of `image push`.
type pushOptions struct {
	Image string // an OCI image archive that build wrote
	Ref   string // HOST/PATH/NAME:TAG
}

func runPush(ctx context.Context, args []string) error {
	var o pushOptions
	fs := flag.NewFlagSet("image push", flag.ContinueOnError)
	fs.StringVar(&o.Image, "image", "", "The OCI image archive to push, as agent, pause or probe wrote it (required).")
	fs.StringVar(&o.Ref, "ref", "", "Where to push it: HOST/PATH/NAME:TAG (required). Plain HTTP only to a loopback host.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.Image == "" || o.Ref == "" {
		return fmt.Errorf("-image and -ref are required: push -image ARCHIVE -ref HOST/PATH/NAME:TAG")
	}
	d, err := push(ctx, o.Image, o.Ref, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return err
	}
	fmt.Printf("%s %s@%s\n", o.Image, o.Ref, d)
	return nil
}

// push writes the image index of archive to ref with remote.WriteIndex and
// returns its digest, the same as the archive's: every manifest, config and
// layer goes as it is. The tag in the archive's name must be ref's, so a
// dev build is not pushed under a release's tag.
func push(ctx context.Context, archive, ref string, opts ...remote.Option) (v1.Hash, error) {
	tag, err := parseTag(ref)
	if err != nil {
		return v1.Hash{}, err
	}
	dir, err := os.MkdirTemp("", "dkc-image-push-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(dir)
	idx, archived, err := openArchive(archive, dir)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("read %s: %w", archive, err)
	}
	if got, err := parseTag(archived); err != nil || got.TagStr() != tag.TagStr() {
		return v1.Hash{}, fmt.Errorf("%s holds %q, not tag %q: build it with that tag (make image VERSION=%s)", archive, archived, tag.TagStr(), tag.TagStr())
	}
	opts = append([]remote.Option{remote.WithContext(ctx), remote.WithTransport(loopbackHTTPOnly{remote.DefaultTransport})}, opts...)
	if err := remote.WriteIndex(tag, idx, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("push %s: %w", tag, err)
	}
	return idx.Digest()
}

// parseTag parses HOST/PATH/NAME:TAG. The registry may be reached over
// plain HTTP (name.Insecure) only when it is on loopback.
func parseTag(ref string) (name.Tag, error) {
	t, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return name.Tag{}, fmt.Errorf("image reference %q: want HOST/PATH/NAME:TAG: %w", ref, err)
	}
	if isLoopback(t.RegistryStr()) {
		return name.NewTag(ref, name.StrictValidation, name.Insecure)
	}
	return t, nil
}

// isLoopback reports whether host[:port] is localhost or a loopback
// address: 127.0.0.0/8 or ::1.
func isLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackHTTPOnly refuses plain-HTTP requests to hosts off loopback.
// go-containerregistry falls back to HTTP by itself for some of them
// (RFC 1918 addresses, *.local), which would send credentials and images
// in the clear.
type loopbackHTTPOnly struct{ next http.RoundTripper }

func (t loopbackHTTPOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" && !isLoopback(req.URL.Host) {
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Redacted(), errPlainHTTP)
	}
	return t.next.RoundTrip(req)
}

// openArchive extracts an archive that writeArchive wrote into dir and
// returns its image index and the name index.json gives it.
func openArchive(archive, dir string) (v1.ImageIndex, string, error) {
	if err := untar(archive, dir); err != nil {
		return nil, "", err
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, "", err
	}
	top, err := lp.ImageIndex()
	if err != nil {
		return nil, "", err
	}
	im, err := top.IndexManifest()
	if err != nil {
		return nil, "", err
	}
	if len(im.Manifests) != 1 {
		return nil, "", fmt.Errorf("index.json has %d entries, want 1", len(im.Manifests))
	}
	d := im.Manifests[0]
	if d.MediaType != types.OCIImageIndex {
		return nil, "", fmt.Errorf("index.json names a %s, want an image index", d.MediaType)
	}
	idx, err := top.ImageIndex(d.Digest)
	if err != nil {
		return nil, "", err
	}
	return idx, d.Annotations[annotationContainerdName], nil
}

// untar extracts the directories and regular files of a tar into dir and
// refuses any name that would leave it.
func untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		clean := path.Clean(h.Name)
		if !filepath.IsLocal(clean) {
			return fmt.Errorf("tar entry %q leaves the archive", h.Name)
		}
		p := filepath.Join(dir, filepath.FromSlash(clean))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("tar entry %q: type %q is not a file or directory", h.Name, h.Typeflag)
		}
	}
}
