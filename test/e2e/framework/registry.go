package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The registry of a cluster with Pods: distribution's registry
// (github.com/distribution/distribution/v3's registry with its filesystem
// storage driver, hack/tools-registry/registry, built by
// hack/build-components-registry.sh), a process the harness owns, serving
// plain HTTP on 127.0.0.1:PORT of the host, where the tests push dkc's
// images with hack/image's push (`make push`, go-containerregistry).
//
// Every node's netns has its own loopback, so the harness listens on
// 127.0.0.1:PORT inside each node's netns too and forwards each connection
// to the registry on the host's loopback. An image reference such as
// 127.0.0.1:PORT/kubectl-dkc-agent:TAG names the same image on the host and
// on every node; each node's containerd pulls it through the hosts.toml of
// that host (config_path), over plain HTTP.

// registryVersion is the version hack/tools-registry/go.mod pins and
// hack/build-components-registry.sh builds.
const registryVersion = "v3.1.2"

// DefaultRegistryBinary is the registry hack/build-components-registry.sh
// builds: $DKC_REGISTRY_BINARY, else
// ~/.cache/kubectl-dkc/bin/registry-v3.1.2/registry.
func DefaultRegistryBinary() string {
	if p := os.Getenv("DKC_REGISTRY_BINARY"); p != "" {
		return p
	}
	return filepath.Join(CacheBinDir(), "registry-"+registryVersion, "registry")
}

// registry is the running registry and its forwarders into the nodes'
// network namespaces.
type registry struct {
	host string // 127.0.0.1:PORT
	proc *process

	fwd *forwarder
}

// startRegistry starts the registry on a free port of 127.0.0.1, storing
// its blobs under c.Dir/registry, and waits until it answers GET /v2/.
func (c *Cluster) startRegistry(ctx context.Context) error {
	port, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	host := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	config := filepath.Join(c.Dir, "registry.yaml")
	yaml := fmt.Sprintf(`# Written by the e2e harness (framework/registry.go).
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: %q
http:
  addr: %q
`, filepath.Join(c.Dir, "registry"), host)
	if err := os.WriteFile(config, []byte(yaml), 0o644); err != nil {
		return err
	}
	// OTEL_TRACES_EXPORTER=none: the registry exports no traces.
	p := c.newProcess("registry", []string{"env", "OTEL_TRACES_EXPORTER=none", c.opts.RegistryBinary, "serve", config}, false)
	c.registry = &registry{host: host, proc: p, fwd: newForwarder(host, c.logf)}
	if err := p.start(); err != nil {
		return err
	}
	err = poll(ctx, 30*time.Second, func() (bool, error) {
		if p.pid() == 0 {
			return false, errors.New("registry exited")
		}
		resp, err := http.Get("http://" + host + "/v2/")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("registry on %s did not answer GET /v2/ (log: %s): %w", host, p.logPath, err)
	}
	c.Registry = host
	return nil
}

// stop closes the registry's forwarders and ends the registry by its PID.
func (r *registry) stop() {
	r.fwd.stop()
	_ = r.proc.stop(10 * time.Second)
}

// forward listens on the registry's address inside netns and forwards
// every connection to the registry on the host's loopback.
func (r *registry) forward(netns string) error {
	if err := r.fwd.listen(netns, r.host); err != nil {
		return fmt.Errorf("forward %s in netns %s to the registry: %w", r.host, netns, err)
	}
	return nil
}

// registryHostsDir is node n's containerd config_path: one directory per
// registry host, holding its hosts.toml.
func (n *Node) registryHostsDir() string { return filepath.Join(n.Dir, "containerd", "certs.d") }

// writeRegistryHosts writes, under certsDir (a containerd config_path),
// the hosts.toml by which that containerd pulls from the registry at host:
// plain HTTP, on the node's loopback.
func writeRegistryHosts(certsDir, host string) error {
	dir := filepath.Join(certsDir, host)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	toml := fmt.Sprintf(`# Written by the e2e harness (framework/registry.go): the cluster's registry.
server = "http://%s"
`, host)
	return os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(toml), 0o644)
}

// PushImages pushes OCI image archives that hack/image wrote to the
// cluster's registry, each as REGISTRY/NAME:TAG after the name in the
// archive (registry.example/kubectl-dkc-agent:TAG becomes
// 127.0.0.1:PORT/kubectl-dkc-agent:TAG), with hack/image's push as `make
// push` does, and returns those references in order. root is the
// repository's root.
func (c *Cluster) PushImages(ctx context.Context, root string, archives ...string) ([]string, error) {
	if c.Registry == "" {
		return nil, errors.New("the cluster runs no registry: start it with Options.Pods")
	}
	var refs []string
	for _, archive := range archives {
		name, err := ImageName(archive)
		if err != nil {
			return nil, err
		}
		ref := c.Registry + "/" + path.Base(name)
		cmd := exec.CommandContext(ctx, "go", "run", ".", "push", "-image", archive, "-ref", ref)
		cmd.Dir = filepath.Join(root, "hack", "image")
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("push %s to %s: %w: %s", archive, ref, err, strings.TrimSpace(string(out)))
		}
		refs = append(refs, ref)
	}
	return refs, nil
}

// PauseImage is the CRI sandbox image of the cluster's nodes (containerd's
// sandbox_image): kubectl-dkc-pause:v1 in the cluster's registry, where a
// cluster with Pods must push it (PushImages) before it runs a pod.
// Without Pods it names the image hack/image builds, and no node pulls it.
func (c *Cluster) PauseImage() string {
	if c.Registry == "" {
		return "registry.example/" + pauseImageName
	}
	return c.Registry + "/" + pauseImageName
}

// pauseImageName is the name and tag hack/image gives the pause image.
const pauseImageName = "kubectl-dkc-pause:v1"

// TagImage gives the image ref (REGISTRY/NAME:TAG) in the cluster's
// registry a second tag, as `crane tag` does: the distribution API's GET
// of its manifest, and a PUT of the same bytes under tag. The image is the
// same; only its name says another version, as an older release's would.
func (c *Cluster) TagImage(ctx context.Context, ref, tag string) error {
	repo, from, ok := strings.Cut(strings.TrimPrefix(ref, c.Registry+"/"), ":")
	if !ok || !strings.HasPrefix(ref, c.Registry+"/") {
		return fmt.Errorf("tag image %s: not REGISTRY/NAME:TAG of registry %s", ref, c.Registry)
	}
	url := "http://" + c.Registry + "/v2/" + repo + "/manifests/"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+from, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, "+
		"application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.docker.distribution.manifest.v2+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("tag image %s: %w", ref, err)
	}
	defer resp.Body.Close()
	manifest, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("tag image %s: get its manifest: %s %v", ref, resp.Status, err)
	}
	put, err := http.NewRequestWithContext(ctx, http.MethodPut, url+tag, bytes.NewReader(manifest))
	if err != nil {
		return err
	}
	put.Header.Set("Content-Type", resp.Header.Get("Content-Type"))
	presp, err := http.DefaultClient.Do(put)
	if err != nil {
		return fmt.Errorf("tag image %s as %s: %w", ref, tag, err)
	}
	defer presp.Body.Close()
	if presp.StatusCode != http.StatusCreated {
		body, _ := io.ReadAll(presp.Body)
		return fmt.Errorf("tag image %s as %s: %s: %s", ref, tag, presp.Status, body)
	}
	return nil
}
