package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/kubectl-dkc/dkc/pkg/controller"
	"github.com/kubectl-dkc/dkc/pkg/install"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// TestInstall runs `kubectl dkc install` on nodes that `kubeadm join` set
// up, with the images in the cluster's registry. The cluster starts with
// what an earlier install left: the manifests of deploy/ as they were
// before their last change (the parent of the last commit that changed
// deploy/*.yaml, from git), applied server-side as field manager
// kubectl-dkc, their images tagged "previous". install upgrades that to
// this build's manifests and images, and returns once the controller's
// leader and an agent on each node run them; a second run changes nothing.
// uninstall refuses while a node holds an assignment; with --reset-nodes
// it sends the node back to kubeadm's config first and leaves nothing of
// dkc in the cluster or on the Nodes (dkcLeft); install then creates it
// all anew.
func TestInstall(t *testing.T) {
	c, refs := kubeadmPodsCluster(t)
	ctx := context.Background()
	root := filepath.Join("..", "..")
	var nodes []*framework.KubeadmNode
	for _, name := range []string{"dkc-install-1", "dkc-install-2"} {
		began := time.Now()
		n, err := c.StartKubeadmNodeWith(ctx, name, framework.KubeadmNodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("kubeadm node %s joined and Ready in %s", n.Name, time.Since(began).Round(time.Millisecond))
		nodes = append(nodes, n)
	}
	agentRef, controllerRef, probeRef := refs[0], refs[1], refs[2]
	// make e2e tags the images with the binary's version, install's
	// default --version.
	var v struct{ Version string }
	if err := json.Unmarshal([]byte(mustDKC(t, c, "", "version", "-o", "json").Stdout), &v); err != nil {
		t.Fatal(err)
	}
	if want := c.Registry + "/kubectl-dkc-agent:" + v.Version; agentRef != want {
		t.Fatalf("the agent's image is %s, not %s: build the binary and the images together (make e2e)", agentRef, want)
	}

	// The earlier install.
	prevAgent, prevController := retag(t, agentRef, "previous"), retag(t, controllerRef, "previous")
	prevDir, prevCommit := previousDeploy(t, root)
	if prevDir == "" {
		// A shallow clone has no earlier deploy/: the earlier install is
		// today's manifests at the earlier images, still an upgrade of
		// the DaemonSet and the Deployment.
		prevDir = filepath.Join(root, "deploy")
		t.Logf("the earlier install: today's deploy/ at the images tagged previous (%s)", prevCommit)
	} else {
		t.Logf("the earlier install: deploy/ of commit %s", prevCommit)
	}
	if _, err := c.DeployDKC(ctx, framework.Deploy{Overlay: prevDir, Images: []string{prevAgent, prevController, probeRef}, FieldManager: source.FieldManager}); err != nil {
		t.Fatal(err)
	}
	waitAgentPods(t, c, 3*time.Minute, func(p *corev1.Pod) bool {
		return agentContainerReady(p) && p.Spec.Containers[0].Image == prevAgent
	})

	objs, err := install.Render(install.Options{ImageRepository: c.Registry, Version: v.Version, Agent: install.AgentDaemonSet})
	if err != nil {
		t.Fatal(err)
	}
	installArgs := []string{"install", "--image-repository", c.Registry, "--timeout", "4m"}

	t.Run("upgrades an earlier install and waits for the controller and the agents", func(t *testing.T) {
		r := dkc(t, c, "", installArgs...)
		if r.ExitCode != 0 {
			logPods(t, c, "app.kubernetes.io/part-of=kubectl-dkc")
			t.Fatalf("install: exit %d", r.ExitCode)
		}
		lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
		if len(lines) != len(objs)+1 {
			t.Fatalf("install printed %d lines for %d objects", len(lines), len(objs))
		}
		for i, obj := range objs {
			if !strings.HasSuffix(lines[i], "/"+obj.GetName()+" "+install.Created) &&
				!strings.HasSuffix(lines[i], "/"+obj.GetName()+" "+install.Configured) &&
				!strings.HasSuffix(lines[i], "/"+obj.GetName()+" "+install.Unchanged) {
				t.Errorf("line %d: %q, want %s/%s and what install did", i, lines[i], obj.GetKind(), obj.GetName())
			}
		}
		for _, want := range []string{"daemonset.apps/dkc-agent configured", "deployment.apps/dkc-controller configured"} {
			if !strings.Contains(r.Stdout, want+"\n") {
				t.Errorf("install's output lacks %q", want)
			}
		}
		if want := "kubectl dkc " + v.Version + " installed: controller: leader dkc-controller-"; !strings.HasPrefix(lines[len(lines)-1], want) ||
			!strings.HasSuffix(lines[len(lines)-1], "; agents: 2 of 2 nodes Ready") {
			t.Errorf("install's last line %q, want %q...; agents: 2 of 2 nodes Ready", lines[len(lines)-1], want)
		}
		// Nothing was left to wait for once install returned.
		leader, err := controller.Leader(ctx, c.Client, "kube-system", time.Now())
		if err != nil || leader == "" {
			t.Fatalf("no controller leads: %v", err)
		}
		p, err := c.Client.CoreV1().Pods("kube-system").Get(ctx, leader, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Spec.Containers[0].Image; got != controllerRef {
			t.Errorf("the leader %s runs %s, want %s", leader, got, controllerRef)
		}
		waitAgentPods(t, c, time.Second, func(p *corev1.Pod) bool {
			return agentContainerReady(p) && p.Spec.Containers[0].Image == agentRef
		})
	})

	t.Run("again: changes nothing", func(t *testing.T) {
		before := resourceVersions(t, c, objs)
		r := mustDKC(t, c, "", installArgs...)
		lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
		for _, l := range lines[:len(lines)-1] {
			if !strings.HasSuffix(l, " "+install.Unchanged) {
				t.Errorf("a second install says %q, want %s", l, install.Unchanged)
			}
		}
		if diff := cmp.Diff(before, resourceVersions(t, c, objs)); diff != "" {
			t.Errorf("resourceVersions after a second install (-before +after):\n%s", diff)
		}
	})

	t.Run("uninstall refuses while a node holds an assignment", func(t *testing.T) {
		local, err := os.ReadFile(nodes[0].Path("/var/lib/kubelet/config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		createConfigMap(t, c, "install-a", framework.ConfigWith(t, local, func(cfg map[string]any) { cfg["maxPods"] = 42 }))
		mustDKC(t, c, "", "assign", nodes[0].Name, "--config", "install-a", "--wait", "--timeout", "2m")
		r := dkc(t, c, "", "uninstall")
		want := "error: uninstall refused: nodes hold an assignment (" + nodes[0].Name + "): add --reset-nodes to send them back to their local config first, a few at a time\n"
		if r.ExitCode != 1 || r.Stderr != want {
			t.Errorf("uninstall: exit %d, stderr %q; want exit 1, %q", r.ExitCode, r.Stderr, want)
		}
		if r.Stdout != "" {
			t.Errorf("uninstall printed %q before it refused", r.Stdout)
		}
	})

	uninstalled := t.Run("uninstall --reset-nodes: nothing of dkc remains", func(t *testing.T) {
		r := dkc(t, c, "", "uninstall", "--reset-nodes", "--timeout", "5m")
		if r.ExitCode != 0 {
			logPods(t, c, "app.kubernetes.io/part-of=kubectl-dkc")
			t.Fatalf("uninstall: exit %d", r.ExitCode)
		}
		// The node went back to kubeadm's config before its agent left.
		if got, err := os.ReadFile(nodes[0].Path("/var/lib/kubelet/config.yaml")); err != nil {
			t.Fatal(err)
		} else if strings.Contains(string(got), "maxPods: 42") {
			t.Errorf("%s still runs the assigned config after uninstall:\n%s", nodes[0].Name, got)
		}
		if left := dkcLeft(t, c); len(left) > 0 {
			t.Errorf("what remains of dkc after uninstall:\n%s", strings.Join(left, "\n"))
		}
	})

	if !uninstalled {
		return // what follows needs a cluster without dkc
	}
	t.Run("install after uninstall: another version, created anew", func(t *testing.T) {
		r := dkc(t, c, "", "install", "--image-repository", c.Registry, "--version", "previous", "--timeout", "4m")
		if r.ExitCode != 0 {
			logPods(t, c, "app.kubernetes.io/part-of=kubectl-dkc")
			t.Fatalf("install: exit %d", r.ExitCode)
		}
		lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
		for _, l := range lines[:len(lines)-1] {
			if !strings.HasSuffix(l, " "+install.Created) {
				t.Errorf("install on a cluster without dkc says %q, want %s", l, install.Created)
			}
		}
		waitAgentPods(t, c, time.Second, func(p *corev1.Pod) bool {
			return agentContainerReady(p) && p.Spec.Containers[0].Image == prevAgent
		})
	})
}

// dkcLeft lists what of dkc the cluster holds, found by name and prefix
// rather than from install's own list: CRDs of kubectl-dkc.io, cluster
// roles, bindings and admission policies named kubectl-dkc*, the objects
// of kube-system and kube-node-lease named dkc-* or kubectl-dkc*, and
// every kubectl-dkc.io/ annotation or label and KubeletConfigOK condition
// on a Node.
func dkcLeft(t *testing.T, c *framework.Cluster) []string {
	t.Helper()
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	ours := func(name string) bool {
		return strings.HasPrefix(name, "dkc-") || strings.HasPrefix(name, "kubectl-dkc")
	}
	var left []string
	for _, r := range []struct {
		group, version, resource string
		namespaces               []string
	}{
		{"apiextensions.k8s.io", "v1", "customresourcedefinitions", nil},
		{"rbac.authorization.k8s.io", "v1", "clusterroles", nil},
		{"rbac.authorization.k8s.io", "v1", "clusterrolebindings", nil},
		{"admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", nil},
		{"admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings", nil},
		{"rbac.authorization.k8s.io", "v1", "roles", []string{"kube-system", "kube-node-lease"}},
		{"rbac.authorization.k8s.io", "v1", "rolebindings", []string{"kube-system", "kube-node-lease"}},
		{"", "v1", "serviceaccounts", []string{"kube-system"}},
		{"", "v1", "pods", []string{"kube-system"}},
		{"", "v1", "podtemplates", []string{"kube-system"}},
		{"apps", "v1", "deployments", []string{"kube-system"}},
		{"apps", "v1", "daemonsets", []string{"kube-system"}},
		{"apps", "v1", "replicasets", []string{"kube-system"}},
		{"coordination.k8s.io", "v1", "leases", []string{"kube-system"}},
	} {
		gvr := schema.GroupVersionResource{Group: r.group, Version: r.version, Resource: r.resource}
		namespaces := r.namespaces
		if namespaces == nil {
			namespaces = []string{""}
		}
		for _, ns := range namespaces {
			list, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range list.Items {
				if ours(o.GetName()) || strings.HasSuffix(o.GetName(), ".kubectl-dkc.io") {
					left = append(left, r.resource+" "+o.GetNamespace()+"/"+o.GetName())
				}
			}
		}
	}
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		for k := range n.Annotations {
			if strings.HasPrefix(k, "kubectl-dkc.io/") {
				left = append(left, "node "+n.Name+" annotation "+k)
			}
		}
		for k := range n.Labels {
			if strings.HasPrefix(k, "kubectl-dkc.io/") {
				left = append(left, "node "+n.Name+" label "+k)
			}
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == "KubeletConfigOK" {
				left = append(left, "node "+n.Name+" condition KubeletConfigOK")
			}
		}
	}
	slices.Sort(left)
	return left
}

// retag tags the image ref (REGISTRY/NAME:TAG, on a loopback registry)
// as tag too, as crane tag does: the registry's API, the same manifest
// under another tag.
func retag(t *testing.T, ref, tag string) string {
	t.Helper()
	host, rest, _ := strings.Cut(ref, "/")
	name, from, _ := strings.Cut(rest, ":")
	url := "http://" + host + "/v2/" + name + "/manifests/"
	req, err := http.NewRequest(http.MethodGet, url+from, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("get %s: %s %v: %s", ref, resp.Status, err, body)
	}
	req, err = http.NewRequest(http.MethodPut, url+tag, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", resp.Header.Get("Content-Type"))
	put, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(put.Body)
	put.Body.Close()
	if put.StatusCode != http.StatusCreated {
		t.Fatalf("tag %s as %s: %s: %s", ref, tag, put.Status, msg)
	}
	return host + "/" + name + ":" + tag
}

// previousDeploy writes deploy/'s manifests as the parent of the last
// commit that changed them had them into a directory, and returns it and
// that commit. In a clone without that history it returns "" and why.
func previousDeploy(t *testing.T, root string) (string, string) {
	t.Helper()
	if out, err := exec.Command("git", "-C", root, "rev-parse", "--is-shallow-repository").Output(); err != nil || strings.TrimSpace(string(out)) == "true" {
		return "", "the clone is shallow or not a git repository: no earlier deploy/"
	}
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
		if err != nil {
			t.Fatalf("git %s: %v (the test needs the repository's history: a clone, not a shallow one)", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	last := git("log", "-1", "--format=%H", "--", "deploy/*.yaml")
	prev := git("rev-parse", "--short", last+"~1")
	dir := filepath.Join(t.TempDir(), "deploy")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(git("ls-tree", "--name-only", prev, "deploy/")) {
		if path.Ext(f) != ".yaml" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, path.Base(f)), []byte(git("show", prev+":"+f)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, prev
}

// resourceVersions are the resourceVersions of objs in the cluster, by
// kind and name.
func resourceVersions(t *testing.T, c *framework.Cluster, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	rvs := map[string]string{}
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatal(err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
		}
		got, err := ri.Get(context.Background(), obj.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rvs[gvk.Kind+"/"+obj.GetName()] = got.GetResourceVersion()
	}
	return rvs
}
