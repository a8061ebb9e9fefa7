package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// deployDaemonSet runs the agent and the controller as deploy/'s DaemonSet
// and Deployment on kubeadm nodes: it pushes make image's archives
// (imagesDir) to the cluster's registry with hack/image's push (root is the
// repository), applies root/deploy with kubectl apply -k, agentArgs added
// to the agent's flags, and waits until every node runs a Ready agent pod
// and two controller pods are Ready (one with a single node). The nodes
// pull the images from the registry.
func deployDaemonSet(ctx context.Context, c *framework.Cluster, root, imagesDir string, agentArgs []string, logf func(string, ...any)) error {
	var archives []string
	for _, kind := range []string{"agent", "controller", "probe", "pause"} {
		archive := filepath.Join(imagesDir, "kubectl-dkc-"+kind+".oci.tar")
		if _, err := os.Stat(archive); err != nil {
			return fmt.Errorf("%s image: %w (run make image)", kind, err)
		}
		archives = append(archives, archive)
	}
	refs, err := c.PushImages(ctx, root, archives...)
	if err != nil {
		return err
	}
	logf("pushed %s to the registry %s", strings.Join(refs, ", "), c.Registry)
	refs = refs[:3] // the agent's, the controller's and the probe pod's
	dir, err := c.DeployDKC(ctx, framework.Deploy{Overlay: filepath.Join(root, "deploy"), Images: refs, AgentArgs: agentArgs})
	if err != nil {
		return err
	}
	logf("applied %s (kubectl apply --server-side -k)", dir)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, w := range []struct {
		name string
		want int
	}{{"dkc-agent", len(c.Nodes) + len(c.KubeadmNodes)}, {"dkc-controller", min(2, len(c.Nodes)+len(c.KubeadmNodes))}} {
		for {
			list, err := c.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + w.name})
			if ready := readyPods(list.Items); err == nil && len(ready) >= w.want {
				for _, p := range ready {
					logf("node %s: %s pod %s", p.Spec.NodeName, w.name, p.Name)
				}
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s pods not Ready within 2m: kubectl -n kube-system describe pods -l app.kubernetes.io/name=%s", w.name, w.name)
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	return nil
}

// readyPods returns the pods of pods that are Ready.
func readyPods(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				out = append(out, p)
			}
		}
	}
	return out
}
