package framework

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pods (Options.Pods) makes a cluster that runs pods, as a DaemonSet and a
// Deployment need:
//   - kube-controller-manager runs the daemonset, deployment and replicaset
//     controllers, the root-ca-cert-publisher that writes the kube-root-ca.crt ConfigMap every
//     service account token volume needs, and the endpointslice controller,
//     which lists a Service's pods with their readiness in its
//     EndpointSlices, and the disruption controller, which computes the
//     PodDisruptionBudgets' status (without it the eviction API refuses
//     the evictions of every pod a budget covers); kube-scheduler binds
//     the pods;
//   - each kubelet runs in its containerd's mount namespace, so that the
//     volumes it mounts (the projected token's tmpfs) are the ones containerd
//     bind-mounts into containers, as on a real node;
//   - containerd's namespace has its own /run, because containerd 1.6 keeps
//     shim sockets and runc state under /run/containerd whatever its config
//     says;
//   - at teardown every container is killed and deleted before containerd
//     stops, so that no shim outlives the cluster;
//   - the nodes pull images, the pause image (PauseImage) included, from
//     the cluster's registry (registry.go), where the tests push them.
//
// Pods with hostNetwork need no CNI; other pods are not supported.

// startPodControllers starts kube-controller-manager and, for Pods,
// kube-scheduler, with the admin credential, serving nothing. For Pods it
// waits until the controller manager published kube-root-ca.crt, and runs
// the garbage collector, as every real cluster does: it deletes the pods
// of a deleted DaemonSet or Deployment, and finishes a foreground
// deletion (kubectl dkc uninstall). For
// Kubeadm the controller manager also runs what kubeadm's control plane
// runs for joining nodes: the bootstrap signer (it signs cluster-info for
// token discovery), the token cleaner, the CSR approver and signer (they
// issue a joining kubelet's client certificate, from the cluster's CA), and
// the node lifecycle controller, which removes the not-ready taint that a
// kubelet registers its Node with once the node is Ready, and taints a node
// whose kubelet stops reporting; and the service account controller, which
// makes each namespace's "default" ServiceAccount, as on every real cluster
// (a pod that names no service account, such as the agent's probe pod,
// needs it).
func (c *Cluster) startPodControllers(ctx context.Context) error {
	c.hostCgroups = cgroupParents()
	var controllers []string
	if c.opts.Pods {
		controllers = append(controllers, "daemonset-controller", "deployment-controller", "replicaset-controller", "root-ca-certificate-publisher-controller", "endpointslice-controller", "garbage-collector-controller", "disruption-controller")
	}
	if c.opts.Kubeadm {
		controllers = append(controllers, "node-lifecycle-controller", "serviceaccount-controller", "bootstrap-signer-controller", "token-cleaner-controller", "certificatesigningrequest-approving-controller", "certificatesigningrequest-signing-controller", "certificatesigningrequest-cleaner-controller")
	}
	argv := []string{
		filepath.Join(c.opts.BinDir, "kube-controller-manager"),
		"--kubeconfig=" + c.Kubeconfig,
		"--controllers=" + strings.Join(controllers, ","),
		"--root-ca-file=" + c.pki.caFile(),
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
	}
	if c.opts.Kubeadm {
		argv = append(argv, "--cluster-signing-cert-file="+c.pki.caFile(), "--cluster-signing-key-file="+c.pki.keyFile("ca"))
	}
	c.controllers = append(c.controllers, c.newProcess("kube-controller-manager", argv, false))
	if c.opts.Pods {
		c.controllers = append(c.controllers, c.newProcess("kube-scheduler", []string{
			filepath.Join(c.opts.BinDir, "kube-scheduler"),
			"--kubeconfig=" + c.Kubeconfig,
			"--authentication-kubeconfig=" + c.Kubeconfig,
			"--authorization-kubeconfig=" + c.Kubeconfig,
			"--leader-elect=false",
			"--secure-port=0",
		}, false))
	}
	for _, p := range c.controllers {
		if err := p.start(); err != nil {
			return err
		}
	}
	return poll(ctx, time.Minute, func() (bool, error) {
		for _, p := range c.controllers {
			if p.pid() == 0 {
				return false, fmt.Errorf("%s exited (log: %s)", p.name, p.logPath)
			}
		}
		if !c.opts.Pods {
			return true, nil
		}
		_, err := c.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil, nil
	})
}

// stopPodControllers ends what startPodControllers started. Called once
// every node stopped, it also removes the cgroup parents containerd made
// for containers (cgroup v1: /sys/fs/cgroup/CONTROLLER/k8s.io), where the
// host had none before.
func (c *Cluster) stopPodControllers() {
	for _, p := range c.controllers {
		_ = p.stop(10 * time.Second)
	}
	if !c.opts.Pods {
		return
	}
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/k8s.io")
	for _, d := range dirs {
		if !c.hostCgroups[d] {
			_ = os.Remove(d) // empty once every container is gone
		}
	}
}

// cgroupParents lists the cgroup v1 directories containerd uses for
// containers that exist now.
func cgroupParents() map[string]bool {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/k8s.io")
	m := map[string]bool{}
	for _, d := range dirs {
		m[d] = true
	}
	return m
}

// podsContainerdArgv gives containerd its own /run (see Pods).
func podsContainerdArgv(argv []string) []string {
	return append([]string{"/bin/sh", "-c", `mount -n -t tmpfs -o mode=0755 tmpfs /run && exec "$@"`, "dkc-run"}, argv...)
}

// podsWrapArgv is wrapArgv for a kubelet of a cluster with Pods: it joins
// the mount namespace of the process in mntPIDFile (its containerd) instead
// of making its own; that namespace already holds the node's bind mounts.
func podsWrapArgv(netns, utab, mntPIDFile string, argv []string) []string {
	script := "set -e\nexport LIBMOUNT_UTAB=" + shellQuote(utab) + "\n" +
		"pid=$(cat " + shellQuote(mntPIDFile) + ")\n" +
		`exec nsenter --mount=/proc/$pid/ns/mnt -- "$@"` + "\n"
	return append([]string{"nsenter", "--net=/run/netns/" + netns, "--", "/bin/sh", "-c", script, "dkc-wrap"}, argv...)
}

// ctr runs containerd's ctr against the node's containerd, in the
// namespace CRI uses.
func (n *Node) ctr(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", n.containerdSocket(), "--namespace", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s on %s: %w: %s", strings.Join(args, " "), n.Name, err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Tasks lists the IDs of the containers running in the node's containerd.
func (n *Node) Tasks(ctx context.Context) ([]string, error) {
	out, err := n.ctr(ctx, "tasks", "list", "--quiet")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// removeContainers kills and deletes every container of the node's
// containerd, so that no shim outlives it. The kubelet must be stopped.
func (n *Node) removeContainers() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids, err := n.Tasks(ctx)
	if err != nil {
		n.cluster.logf("%s: list containers: %v", n.Name, err)
	}
	for _, id := range ids {
		_, _ = n.ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id)
	}
	for _, id := range ids {
		if _, err := n.ctr(ctx, "tasks", "delete", "--force", id); err != nil {
			n.cluster.logf("%s: %v", n.Name, err)
		}
	}
	out, _ := n.ctr(ctx, "containers", "list", "--quiet")
	for _, id := range strings.Fields(out) {
		_, _ = n.ctr(ctx, "containers", "delete", id)
	}
}

// Images are the OCI archives of dkc's images and the pause image.
type Images struct {
	Agent, Controller, Probe, Pause string
}

// BuildImages writes the agent and controller images, built from the
// repository at root, and the probe and pause images as OCI archives into dir, for
// this host's platform only, with hack/image as `make image` does.
func BuildImages(ctx context.Context, root, dir string) (Images, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return Images{}, err
	}
	var im Images
	if im.Agent, err = BuildImage(ctx, root, dir, "agent", "-root", abs, "-version", "v0.0.0-e2e"); err != nil {
		return Images{}, err
	}
	if im.Controller, err = BuildImage(ctx, root, dir, "controller", "-root", abs, "-version", "v0.0.0-e2e"); err != nil {
		return Images{}, err
	}
	if im.Probe, err = BuildImage(ctx, root, dir, "probe"); err != nil {
		return Images{}, err
	}
	if im.Pause, err = BuildImage(ctx, root, dir, "pause"); err != nil {
		return Images{}, err
	}
	return im, nil
}

// BuildImage writes hack/image's image kind (agent, controller, pause or probe) as the
// OCI archive dir/kubectl-dkc-KIND.oci.tar, for this host's platform only,
// with extra flags after kind's, as `make image` does, and returns its path.
func BuildImage(ctx context.Context, root, dir, kind string, extra ...string) (string, error) {
	archive := filepath.Join(dir, "kubectl-dkc-"+kind+".oci.tar")
	args := append([]string{"run", ".", kind, "-platforms", "linux/" + runtime.GOARCH, "-o", archive}, extra...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = filepath.Join(root, "hack", "image")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("hack/image %s: %w: %s", kind, err, strings.TrimSpace(string(out)))
	}
	return archive, nil
}

// criContainerdConfig is the CRI section of the node's containerd config
// (criConfig), with the node's registry hosts for Pods.
func (n *Node) criContainerdConfig() string {
	hosts := ""
	if n.cluster.opts.Pods {
		hosts = n.registryHostsDir()
	}
	return criConfig(n.cluster.PauseImage(), hosts)
}

// criConfig is the CRI section of a node's containerd config: the sandbox
// image is pause; when hostsDir is set, images are pulled through the
// hosts.toml files under it (containerd's config_path); and no container's
// oom_score_adj goes below containerd's own, because the harness may lack
// CAP_SYS_RESOURCE (runc then fails with "failed to update
// /proc/self/oom_score_adj: Permission denied" for a node-critical pod).
func criConfig(pause, hostsDir string) string {
	s := fmt.Sprintf("\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = %q\n  restrict_oom_score_adj = true\n", pause)
	if hostsDir != "" {
		s += fmt.Sprintf("\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = %q\n", hostsDir)
	}
	return s
}

// Deploy says what DeployDKC installs.
type Deploy struct {
	// Overlay is the kustomization applied: deploy/ itself.
	Overlay string
	// Images are the references the images were pushed as, such as
	// REGISTRY/kubectl-dkc-agent:TAG; each replaces registry.example/NAME.
	Images []string
	// AgentArgs are flags added after the DaemonSet's own agent args (the
	// last of a repeated flag wins), as an operator's kustomization would
	// add them with a patch.
	AgentArgs []string
	// FieldManager is kubectl apply's --field-manager, when set: as
	// kubectl-dkc, the apply stands for an earlier `kubectl dkc install`.
	FieldManager string
}

// DeployDKC installs deploy/ (the agent's DaemonSet, the controller's
// Deployment and what they need) as an operator would, with
// `kubectl apply --server-side -k`, from d.Overlay under a kustomization of
// the cluster's own that sets
//   - the images, through kustomize's images: (the newName and newTag of
//     each of d.Images), as docs/install.md tells operators to;
//   - d.AgentArgs, if any, appended to the agent's args with a JSON patch.
//
// It runs on kubeadm nodes (StartKubeadmNodeWith), which, as a real node,
// route the kubernetes Service's ClusterIP to the apiserver
// (routeServices) and restart kubelet.service over their own D-Bus.
//
// It returns the kustomization's directory.
func (c *Cluster) DeployDKC(ctx context.Context, d Deploy) (string, error) {
	abs, err := filepath.Abs(d.Overlay)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(c.Dir, "deploy-dkc")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// kustomize takes no absolute path in resources:.
	rel, err := filepath.Rel(dir, abs)
	if err != nil {
		return "", err
	}
	k := fmt.Sprintf("# Written by the e2e harness (framework.DeployDKC).\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- %s\nimages:\n", rel)
	for _, ref := range d.Images {
		name, tag := ref, "latest"
		if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
			name, tag = ref[:i], ref[i+1:]
		}
		k += fmt.Sprintf("- name: registry.example/%s\n  newName: %s\n  newTag: %q\n", path.Base(name), name, tag)
	}
	var patches []string
	if len(d.AgentArgs) > 0 {
		p := "- target: {kind: DaemonSet, name: dkc-agent}\n  patch: |-\n"
		for _, arg := range d.AgentArgs {
			p += fmt.Sprintf("    - {op: add, path: /spec/template/spec/containers/0/args/-, value: %q}\n", arg)
		}
		patches = append(patches, p)
	}
	if len(patches) > 0 {
		k += "patches:\n" + strings.Join(patches, "")
	}
	return dir, c.applyKustomization(ctx, dir, k, d.FieldManager)
}

// applyKustomization writes kustomization to dir and applies it with
// `kubectl apply --server-side -k`, as fieldManager when it is set.
func (c *Cluster) applyKustomization(ctx context.Context, dir, kustomization, fieldManager string) error {
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		return err
	}
	kubectl, err := Kubectl()
	if err != nil {
		return err
	}
	args := []string{"--kubeconfig", c.Kubeconfig, "apply", "--server-side", "-k", dir}
	if fieldManager != "" {
		args = append(args, "--field-manager", fieldManager)
	}
	out, err := exec.CommandContext(ctx, kubectl, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl apply -k %s: %w: %s", dir, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ImageName is the name of the image in an OCI image archive that
// hack/image wrote: the io.containerd.image.name annotation of its one
// index.json entry, the name `make image` gave it (IMAGE_REPO/NAME:TAG).
func ImageName(archive string) (string, error) {
	f, err := os.Open(archive)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			return "", fmt.Errorf("%s: no index.json: %w", archive, err)
		}
		if h.Name != "index.json" {
			continue
		}
		var index struct {
			Manifests []struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"manifests"`
		}
		if err := json.NewDecoder(tr).Decode(&index); err != nil {
			return "", fmt.Errorf("%s: index.json: %w", archive, err)
		}
		if len(index.Manifests) != 1 || index.Manifests[0].Annotations["io.containerd.image.name"] == "" {
			return "", fmt.Errorf("%s: index.json names no single image", archive)
		}
		return index.Manifests[0].Annotations["io.containerd.image.name"], nil
	}
}
