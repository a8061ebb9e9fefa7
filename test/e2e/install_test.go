package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
func TestInstall(t *testing.T) {
	c, refs := kubeadmPodsCluster(t)
	ctx := context.Background()
	root := filepath.Join("..", "..")
	for _, name := range []string{"dkc-install-1", "dkc-install-2"} {
		began := time.Now()
		n, err := c.StartKubeadmNodeWith(ctx, name, framework.KubeadmNodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("kubeadm node %s joined and Ready in %s", n.Name, time.Since(began).Round(time.Millisecond))
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
	images := dkcImages(t, root)
	prevAgent := pushAs(t, root, images.Agent, c.Registry+"/kubectl-dkc-agent:previous")
	prevController := pushAs(t, root, images.Controller, c.Registry+"/kubectl-dkc-controller:previous")
	prevDir, prevCommit := previousDeploy(t, root)
	t.Logf("the earlier install: deploy/ of commit %s", prevCommit)
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
}

// pushAs pushes the OCI archive as ref, as make push does.
func pushAs(t *testing.T, root, archive, ref string) string {
	t.Helper()
	cmd := exec.Command("go", "run", ".", "push", "-image", archive, "-ref", ref)
	cmd.Dir = filepath.Join(root, "hack", "image")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("push %s as %s: %v: %s", archive, ref, err, out)
	}
	return ref
}

// previousDeploy writes deploy/'s manifests as the parent of the last
// commit that changed them had them into a directory, and returns it and
// that commit. It needs the repository's history.
func previousDeploy(t *testing.T, root string) (string, string) {
	t.Helper()
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
