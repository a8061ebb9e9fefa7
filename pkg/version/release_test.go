package version

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// TestReleaseFilesAgree: one version names the release everywhere. The file
// VERSION is the source; the Makefile's release (and the version `make
// release` stamps into the binaries and tags the agent image with), the
// kustomization's agent tag, the DaemonSet's image and the krew manifest
// must all say the same (docs/release.md).
func TestReleaseFilesAgree(t *testing.T) {
	b, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSpace(string(b))
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(want) {
		t.Fatalf("VERSION says %q: want a release version vX.Y.Z", want)
	}

	var kustomization struct {
		Images []struct {
			Name    string `json:"name"`
			NewName string `json:"newName"`
			NewTag  string `json:"newTag"`
		} `json:"images"`
	}
	readYAML(t, "../../deploy/kustomization.yaml", &kustomization)
	var krew struct {
		Spec struct {
			Version   string `json:"version"`
			Platforms []struct {
				URI string `json:"uri"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	readYAML(t, "../../plugins/dkc.yaml", &krew)
	type workload struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Image string `json:"image"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	var daemonSet, deployment workload
	readYAML(t, "../../deploy/daemonset.yaml", &daemonSet)
	readYAML(t, "../../deploy/controller.yaml", &deployment, "Deployment")

	got := map[string]string{
		"plugins/dkc.yaml spec.version": krew.Spec.Version,
	}
	for _, img := range kustomization.Images {
		switch img.Name {
		case "registry.example/kubectl-dkc-agent":
			got["deploy/kustomization.yaml agent newTag"] = img.NewTag
		case "registry.example/kubectl-dkc-controller":
			got["deploy/kustomization.yaml controller newTag"] = img.NewTag
		}
	}
	for _, c := range daemonSet.Spec.Template.Spec.Containers {
		if _, tag, ok := strings.Cut(c.Image, "kubectl-dkc-agent:"); ok {
			got["deploy/daemonset.yaml image tag"] = tag
		}
	}
	for _, c := range deployment.Spec.Template.Spec.Containers {
		if _, tag, ok := strings.Cut(c.Image, "kubectl-dkc-controller:"); ok {
			got["deploy/controller.yaml image tag"] = tag
		}
	}
	for _, p := range krew.Spec.Platforms {
		if !strings.Contains(p.URI, "/releases/download/"+want+"/kubectl-dkc_"+want+"_") {
			t.Errorf("plugins/dkc.yaml: uri %s is not an archive of release %s", p.URI, want)
		}
	}
	if make, err := exec.LookPath("make"); err == nil {
		cmd := exec.Command(make, "--no-print-directory", "-s", "-C", "../..", "version")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("make version: %v", err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			k, v, _ := strings.Cut(line, "=")
			got["Makefile "+k] = v
		}
		// A build that is not `make release` is a dev build of that release.
		if v := got["Makefile VERSION"]; strings.HasPrefix(v, want+"-dev-") {
			got["Makefile VERSION"] = want
		}
	} else {
		t.Logf("no make: the Makefile's versions not checked")
	}

	wantAll := map[string]string{}
	for k := range got {
		wantAll[k] = want
	}
	if diff := cmp.Diff(wantAll, got); diff != "" {
		t.Errorf("the release files disagree with VERSION %s (-want +got):\n%s", want, diff)
	}
	for _, k := range []string{"plugins/dkc.yaml spec.version", "deploy/kustomization.yaml agent newTag", "deploy/kustomization.yaml controller newTag",
		"deploy/daemonset.yaml image tag", "deploy/controller.yaml image tag"} {
		if _, ok := got[k]; !ok {
			t.Errorf("found no %s", k)
		}
	}
}

// readYAML reads the document of path into into: the only one, or in a
// file of several the one of kind kind.
func readYAML(t *testing.T, path string, into any, kind ...string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(kind) > 0 && meta.Kind != kind[0] {
			continue
		}
		if err := yaml.Unmarshal([]byte(doc), into); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return
	}
	t.Fatalf("%s: no %v", path, kind)
}
