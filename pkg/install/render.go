// Package install puts dkc into a cluster and takes it out again: it
// renders the manifests of deploy/ (embedded in the binary) with the
// images of one version, applies them server-side, waits until the
// controller leads and every node runs a Ready agent, and removes them.
package install

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kustomizetypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/deploy"
)

// How the agent runs on the nodes (--agent).
const (
	// AgentDaemonSet is deploy/'s DaemonSet, one agent pod per node.
	AgentDaemonSet = "daemonset"
	// AgentSystemd is deploy/systemd's unit, which an administrator
	// installs on each node; the cluster gets only its identity.
	AgentSystemd = "systemd"
)

// Agents are the values of --agent.
var Agents = []string{AgentDaemonSet, AgentSystemd}

// PlaceholderRegistry is the registry deploy/ names in its images, under
// which nothing is published.
const PlaceholderRegistry = "registry.example"

// The images a release builds and tags with its version; the others (the
// probe's) keep the tag deploy/kustomization.yaml gives them.
const (
	AgentImage      = "kubectl-dkc-agent"
	ControllerImage = "kubectl-dkc-controller"
)

// The files of deploy/ that only the DaemonSet needs, and the one that
// only the systemd unit needs (docs/install.md).
var (
	daemonSetFiles = []string{"rbac.yaml", "daemonset.yaml", "probe-pod.yaml"}
	systemdFiles   = []string{"rbac-host.yaml"}
)

// Options say what to render.
type Options struct {
	// ImageRepository replaces deploy/'s placeholder registry
	// (registry.example) in every image: HOST/PATH, where `make push
	// IMAGE_REPO=HOST/PATH` pushed them.
	ImageRepository string
	// Version is the tag of the agent's and the controller's images.
	Version string
	// Agent is AgentDaemonSet or AgentSystemd.
	Agent string
}

// Kustomization is deploy/kustomization.yaml, as embedded.
func Kustomization() (*kustomizetypes.Kustomization, error) {
	b, err := fs.ReadFile(deploy.FS, "kustomization.yaml")
	if err != nil {
		return nil, fmt.Errorf("read deploy/kustomization.yaml: %w", err)
	}
	var k kustomizetypes.Kustomization
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		return nil, fmt.Errorf("parse deploy/kustomization.yaml: %w", err)
	}
	return &k, nil
}

// Files are the files of deploy/ that o's install applies, in the order
// it applies them: deploy/kustomization.yaml's resources for the
// DaemonSet; without the DaemonSet's own files, and with rbac-host.yaml,
// for the systemd unit.
func Files(o Options) ([]string, error) {
	k, err := Kustomization()
	if err != nil {
		return nil, err
	}
	if o.Agent != AgentSystemd {
		return k.Resources, nil
	}
	var files []string
	for _, f := range k.Resources {
		if !slices.Contains(daemonSetFiles, f) {
			files = append(files, f)
		}
	}
	return append(files, systemdFiles...), nil
}

// Images are the kustomize images: o sets over deploy/kustomization.yaml's:
// every image of the placeholder registry moves to o.ImageRepository, and
// the agent's and the controller's are tagged o.Version.
func Images(o Options) ([]kustomizetypes.Image, error) {
	k, err := Kustomization()
	if err != nil {
		return nil, err
	}
	var images []kustomizetypes.Image
	for _, im := range k.Images {
		base, ok := strings.CutPrefix(im.Name, PlaceholderRegistry+"/")
		if !ok {
			return nil, fmt.Errorf("deploy/kustomization.yaml: image %q is not under %s", im.Name, PlaceholderRegistry)
		}
		im.NewName = strings.TrimSuffix(o.ImageRepository, "/") + "/" + base
		if base == AgentImage || base == ControllerImage {
			im.NewTag, im.Digest = o.Version, ""
		}
		images = append(images, im)
	}
	return images, nil
}

// Render reads the files of deploy/ that o's install applies (Files),
// embedded in the binary, and sets their images as
// deploy/kustomization.yaml's images: would, with o's repository and
// version (Images). Nothing else of an object changes: it is the file's,
// parsed as kubectl apply -f parses it. (kustomize itself is not used: its
// YAML parser adds a line break to folded scalars with more-indented lines,
// such as the admission policies' CEL.)
func Render(o Options) ([]*unstructured.Unstructured, error) {
	files, err := Files(o)
	if err != nil {
		return nil, err
	}
	images, err := Images(o)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		b, err := fs.ReadFile(deploy.FS, f)
		if err != nil {
			return nil, fmt.Errorf("read deploy/%s: %w", f, err)
		}
		in, err := Decode(b)
		if err != nil {
			return nil, fmt.Errorf("parse deploy/%s: %w", f, err)
		}
		for _, obj := range in {
			setImages(obj.Object, images)
		}
		objs = append(objs, in...)
	}
	return objs, nil
}

// Decode parses a stream of YAML documents into objects, skipping empty
// ones.
func Decode(b []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, err
		}
		j, err := utilyaml.ToJSON(doc)
		if err != nil {
			return nil, err
		}
		if s := strings.TrimSpace(string(j)); s == "null" || s == "" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(j); err != nil {
			return nil, err
		}
		objs = append(objs, obj)
	}
}

// setImages sets the image of every container and init container under v
// as kustomize's images: does: an image whose name (without tag or
// digest) is an entry's name gets its newName, and its newTag when set.
func setImages(v any, images []kustomizetypes.Image) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if k == "containers" || k == "initContainers" {
				list, _ := e.([]any)
				for _, c := range list {
					if c, ok := c.(map[string]any); ok {
						if ref, ok := c["image"].(string); ok {
							c["image"] = setImage(ref, images)
						}
					}
				}
				continue
			}
			setImages(e, images)
		}
	case []any:
		for _, e := range v {
			setImages(e, images)
		}
	}
}

func setImage(ref string, images []kustomizetypes.Image) string {
	name, tag := ref, ""
	if i := strings.IndexAny(ref, "@"); i >= 0 {
		name, tag = ref[:i], ref[i:]
	}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name, tag = name[:i], name[i:]+tag
	}
	for _, im := range images {
		if im.Name != name {
			continue
		}
		if im.NewName != "" {
			name = im.NewName
		}
		switch {
		case im.Digest != "":
			tag = "@" + im.Digest
		case im.NewTag != "":
			tag = ":" + im.NewTag
		}
		return name + tag
	}
	return ref
}
