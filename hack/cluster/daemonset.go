package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// deployDaemonSet runs the agent as the DaemonSet of deploy/, through the
// test overlay: it imports make image's archives (imagesDir) into every
// node's containerd, applies the overlay with kubectl apply -k, and waits
// until every node runs a Ready agent pod.
func deployDaemonSet(ctx context.Context, c *framework.Cluster, imagesDir, overlay string, logf func(string, ...any)) error {
	agent := filepath.Join(imagesDir, "kubectl-dkc-agent.oci.tar")
	pause := filepath.Join(imagesDir, "kubectl-dkc-pause.oci.tar")
	ref, err := framework.ImageName(agent)
	if err != nil {
		return fmt.Errorf("agent image: %w (run make image)", err)
	}
	for _, n := range c.Nodes {
		for _, archive := range []string{pause, agent} {
			if err := n.ImportImage(ctx, archive); err != nil {
				return err
			}
		}
	}
	logf("imported %s and %s into every node's containerd", ref, framework.PauseImage)
	dir, err := c.DeployAgent(ctx, overlay, ref)
	if err != nil {
		return err
	}
	logf("applied %s (kubectl apply -k)", dir)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		list, err := c.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=dkc-agent"})
		if err == nil && len(list.Items) == len(c.Nodes) && allReady(list.Items) {
			for _, p := range list.Items {
				logf("node %s: dkc agent pod %s", p.Spec.NodeName, p.Name)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dkc agent pods not Ready within 2m: kubectl -n kube-system describe pods -l app.kubernetes.io/name=dkc-agent")
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func allReady(pods []corev1.Pod) bool {
	for _, p := range pods {
		ready := false
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			return false
		}
	}
	return true
}
