package install

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kustomizetypes "sigs.k8s.io/kustomize/api/types"

	"github.com/kubectl-dkc/dkc/deploy"
)

// TestEmbedded: the binary holds deploy/'s manifests byte for byte, and
// every one of them.
func TestEmbedded(t *testing.T) {
	onDisk, err := filepath.Glob("../../deploy/*.yaml")
	if err != nil || len(onDisk) == 0 {
		t.Fatalf("deploy/*.yaml: %v %v", onDisk, err)
	}
	var want, got []string
	for _, p := range onDisk {
		want = append(want, filepath.Base(p))
		disk, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		embedded, err := fs.ReadFile(deploy.FS, filepath.Base(p))
		if err != nil {
			t.Errorf("%s is not embedded: %v", p, err)
			continue
		}
		if !bytes.Equal(disk, embedded) {
			t.Errorf("%s: the embedded bytes differ from the file's", p)
		}
	}
	entries, err := fs.ReadDir(deploy.FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("embedded files (-deploy/*.yaml +embedded):\n%s", diff)
	}
}

// TestRender: an install applies the objects of the files that
// deploy/kustomization.yaml names (for the systemd unit, those but the
// DaemonSet's, and rbac-host.yaml), each as the file has it but for its
// images, which name the repository and version asked for.
func TestRender(t *testing.T) {
	const repo = "registry.test:5000/dkc"
	k, err := Kustomization()
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		agent      string
		wantFiles  []string
		wantImages []string
	}{
		"daemonset": {
			agent:     AgentDaemonSet,
			wantFiles: k.Resources,
			wantImages: []string{
				repo + "/kubectl-dkc-agent:v9.8.7",
				repo + "/kubectl-dkc-controller:v9.8.7",
				repo + "/kubectl-dkc-probe:v1",
			},
		},
		"systemd": {
			agent:      AgentSystemd,
			wantFiles:  []string{"crds.yaml", "admission-policy.yaml", "controller.yaml", "roles.yaml", "rbac-host.yaml"},
			wantImages: []string{repo + "/kubectl-dkc-controller:v9.8.7"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := Options{ImageRepository: repo + "/", Version: "v9.8.7", Agent: tc.agent}
			files, err := Files(o)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantFiles, files); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			var want []*unstructured.Unstructured
			for _, f := range tc.wantFiles {
				want = append(want, readObjects(t, filepath.Join("../../deploy", f))...)
			}
			got, err := Render(o)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(keys(want), keys(got)); diff != "" {
				t.Fatalf("objects (-in the files +rendered):\n%s", diff)
			}
			var images []string
			for i := range got {
				images = append(images, takeImages(got[i].Object)...)
				takeImages(want[i].Object)
				if diff := cmp.Diff(want[i].Object, got[i].Object); diff != "" {
					t.Errorf("%s differs from its file in more than its images (-file +rendered):\n%s", key(got[i]), diff)
				}
			}
			slices.Sort(images)
			images = slices.Compact(images)
			if diff := cmp.Diff(tc.wantImages, images); diff != "" {
				t.Errorf("images (-want +got):\n%s", diff)
			}
		})
	}
}

func readObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return objs
}

func key(o *unstructured.Unstructured) string {
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

func keys(objs []*unstructured.Unstructured) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, key(o))
	}
	return ks
}

// takeImages blanks every "image" field under v and returns their values.
func takeImages(v any) []string {
	var images []string
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && k == "image" {
				images = append(images, s)
				v[k] = ""
				continue
			}
			images = append(images, takeImages(e)...)
		}
	case []any:
		for _, e := range v {
			images = append(images, takeImages(e)...)
		}
	}
	return images
}

func TestSetImage(t *testing.T) {
	images := []kustomizetypes.Image{
		{Name: "registry.example/a", NewName: "r.test/a", NewTag: "v2"},
		{Name: "registry.example/b", NewName: "r.test/b"},
		{Name: "registry.example/c", Digest: "sha256:abc"},
	}
	tests := map[string]struct{ ref, want string }{
		"tag replaced":              {ref: "registry.example/a:v1", want: "r.test/a:v2"},
		"tag added":                 {ref: "registry.example/a", want: "r.test/a:v2"},
		"tag kept":                  {ref: "registry.example/b:v1", want: "r.test/b:v1"},
		"digest replaces the tag":   {ref: "registry.example/c:v1", want: "registry.example/c@sha256:abc"},
		"a port is not a tag":       {ref: "localhost:5000/x:v1", want: "localhost:5000/x:v1"},
		"another image is left":     {ref: "registry.example/ab:v1", want: "registry.example/ab:v1"},
		"tag and digest both moved": {ref: "registry.example/b:v1@sha256:def", want: "r.test/b:v1@sha256:def"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := setImage(tc.ref, images); got != tc.want {
				t.Errorf("setImage(%q) = %q, want %q", tc.ref, got, tc.want)
			}
		})
	}
}
