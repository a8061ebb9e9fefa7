// Package krew checks that plugins/dkc.yaml, the manifest that makes this
// repository a krew custom index, is a valid rendering of krew-manifest.yaml.
package krew

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

type manifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Caveats          string `json:"caveats"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
		} `json:"platforms"`
	} `json:"spec"`
}

func load(t *testing.T, path string) manifest {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

func TestRenderedManifest(t *testing.T) {
	tmpl := load(t, "../../krew-manifest.yaml")
	got := load(t, "../../plugins/dkc.yaml")
	if got.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || got.Kind != "Plugin" {
		t.Errorf("apiVersion/kind = %s/%s, want krew.googlecontainertools.github.com/v1alpha2/Plugin", got.APIVersion, got.Kind)
	}
	if got.Metadata.Name != "dkc" {
		t.Errorf("name %q, want dkc: kubectl finds the plugin as kubectl-dkc", got.Metadata.Name)
	}
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(got.Spec.Version) {
		t.Errorf("version %q is not a release version vX.Y.Z", got.Spec.Version)
	}
	if len(got.Spec.Platforms) != len(tmpl.Spec.Platforms) {
		t.Fatalf("%d platforms, template has %d", len(got.Spec.Platforms), len(tmpl.Spec.Platforms))
	}
	sha := regexp.MustCompile(`^[0-9a-f]{64}$`)
	for i, p := range got.Spec.Platforms {
		os, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		if want := tmpl.Spec.Platforms[i].Selector.MatchLabels; want["os"] != os || want["arch"] != arch {
			t.Errorf("platform %d is %s/%s, template says %s/%s", i, os, arch, want["os"], want["arch"])
		}
		if !sha.MatchString(p.SHA256) {
			t.Errorf("%s/%s: sha256 %q is not 64 hex digits", os, arch, p.SHA256)
		}
		wantURI := strings.ReplaceAll(tmpl.Spec.Platforms[i].URI, "VERSION", got.Spec.Version)
		if p.URI != wantURI {
			t.Errorf("%s/%s: uri %q, want %q", os, arch, p.URI, wantURI)
		}
		if p.Bin != "kubectl-dkc" {
			t.Errorf("%s/%s: bin %q, want kubectl-dkc", os, arch, p.Bin)
		}
		var files []string
		for _, f := range p.Files {
			files = append(files, f.From)
		}
		if strings.Join(files, ",") != "kubectl-dkc,kubectl_complete-dkc,README.md" {
			t.Errorf("%s/%s: files %v", os, arch, files)
		}
	}
}
