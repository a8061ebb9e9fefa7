package main

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// testArchive writes a two-platform archive, as build does but without
// building a program, named ref, and returns its index digest.
func testArchive(t *testing.T, ref string) (string, v1.Hash) {
	t.Helper()
	epoch := time.Unix(1700000000, 0).UTC()
	platforms := []platform{{"linux", "amd64"}, {"linux", "arm64"}}
	images := map[platform]v1.Image{}
	for _, p := range platforms {
		img, err := newImage(imageSpec{Platform: p, Epoch: epoch, Entrypoint: []string{"/hello"},
			Files: []file{{Name: "hello", Mode: 0o755, Data: []byte("hello from " + p.String())}}})
		if err != nil {
			t.Fatal(err)
		}
		images[p] = img
	}
	idx, err := newIndex(images, platforms)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "hello.oci.tar")
	if err := writeArchive(archive, idx, ref, epoch); err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return archive, d
}

// TestPush pushes an archive to a real OCI registry (go-containerregistry's
// pkg/registry) served over plain HTTP on 127.0.0.1, then pulls it back: the
// tag resolves to the archive's index digest and every platform's image,
// config and layers are there.
func TestPush(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ref := host + "/dkc/hello:v0.1.0-test"
	archive, want := testArchive(t, "registry.example/hello:v0.1.0-test")

	got, err := push(context.Background(), archive, ref)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("push returned %s, the archive's index is %s", got, want)
	}
	tag, err := parseTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(tag)
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	if desc.Digest != want {
		t.Errorf("%s resolves to %s, the archive's index is %s", ref, desc.Digest, want)
	}
	idx, err := desc.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, m := range im.Manifests {
		platforms = append(platforms, m.Platform.String())
		img, err := remote.Image(tag.Context().Digest(m.Digest.String()))
		if err != nil {
			t.Fatalf("pull %s %s: %v", m.Platform, m.Digest, err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatalf("%s: config: %v", m.Platform, err)
		}
		if got := cfg.OS + "/" + cfg.Architecture; got != m.Platform.String() {
			t.Errorf("%s: config says %s", m.Platform, got)
		}
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range layers {
			rc, err := l.Compressed()
			if err != nil {
				t.Fatalf("%s: layer: %v", m.Platform, err)
			}
			_, err = io.Copy(io.Discard, rc) // verifies the digest at EOF
			rc.Close()
			if err != nil {
				t.Fatalf("%s: layer: %v", m.Platform, err)
			}
		}
	}
	if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, platforms); diff != "" {
		t.Errorf("platforms (-want +got):\n%s", diff)
	}

	// A dev build is not pushed under another tag.
	if _, err := push(context.Background(), archive, host+"/dkc/hello:v0.1.0"); err == nil || !strings.Contains(err.Error(), `not tag "v0.1.0"`) {
		t.Errorf("push under another tag: %v, want it refused", err)
	}
}

func TestParseTag(t *testing.T) {
	tests := map[string]struct {
		ref      string
		insecure bool
		wantErrs string
	}{
		"loopback IPv4":     {ref: "127.0.0.1:5000/dkc/agent:v1", insecure: true},
		"loopback 127/8":    {ref: "127.1.2.3:5000/dkc/agent:v1", insecure: true},
		"localhost":         {ref: "localhost:5000/agent:v1", insecure: true},
		"loopback IPv6":     {ref: "[::1]:5000/agent:v1", insecure: true},
		"remote":            {ref: "ghcr.io/kubectl-dkc/kubectl-dkc-agent:v0.1.0"},
		"no tag":            {ref: "ghcr.io/kubectl-dkc/kubectl-dkc-agent", wantErrs: "want HOST/PATH/NAME:TAG"},
		"uppercase repo":    {ref: "ghcr.io/Kubectl/agent:v1", wantErrs: "want HOST/PATH/NAME:TAG"},
		"localhost-ish DNS": {ref: "localhost.example:5000/agent:v1"},
	}
	for desc, tc := range tests {
		t.Run(desc, func(t *testing.T) {
			tag, err := parseTag(tc.ref)
			if tc.wantErrs != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrs) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErrs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// name.Insecure is set only on loopback.
			insecure, err := name.NewTag(tc.ref, name.StrictValidation, name.Insecure)
			if err != nil {
				t.Fatal(err)
			}
			if got := tag.Registry == insecure.Registry; got != tc.insecure {
				t.Errorf("name.Insecure set: %v, want it only on loopback", got)
			}
		})
	}
}

// TestLoopbackHTTPOnly: go-containerregistry itself falls back to plain HTTP
// for RFC 1918 addresses and *.local; push refuses every such request.
func TestLoopbackHTTPOnly(t *testing.T) {
	ok := roundTripFunc(func(*http.Request) (*http.Response, error) { return &http.Response{StatusCode: 200}, nil })
	tests := map[string]error{
		"http://127.0.0.1:5000/v2/":     nil,
		"http://127.9.9.9/v2/":          nil,
		"http://localhost:5000/v2/":     nil,
		"http://[::1]:5000/v2/":         nil,
		"https://10.0.0.1/v2/":          nil,
		"https://ghcr.io/v2/":           nil,
		"http://10.0.0.1:5000/v2/":      errPlainHTTP,
		"http://192.168.1.5/v2/":        errPlainHTTP,
		"http://registry.local/v2/":     errPlainHTTP,
		"http://ghcr.io/v2/":            errPlainHTTP,
		"http://localhost.example/v2/":  errPlainHTTP,
		"http://128.0.0.1/v2/":          errPlainHTTP,
		"http://[::ffff:10.0.0.1]/v2/":  errPlainHTTP,
		"http://0.0.0.0:5000/v2/":       errPlainHTTP,
		"http://[fe80::1]:5000/v2/":     errPlainHTTP,
		"http://127.0.0.1.nip.io/v2/":   errPlainHTTP,
		"http://user@10.0.0.1:5000/v2/": errPlainHTTP,
	}
	for url, want := range tests {
		t.Run(url, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, url, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = loopbackHTTPOnly{ok}.RoundTrip(req)
			if !errors.Is(err, want) {
				t.Errorf("error %v, want %v", err, want)
			}
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
