package util

import (
	"context"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dkc/dkc/pkg/configz"
	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
)

// ReportOptIns prints on w, for each of nodes, what payload would change
// there in a class that needs the assigner's opt-in, against what the
// node's kubelet runs (its /configz, configz.Running), and the exact
// --allow-unsafe that the change needs (kubeletconfig.OptInReport): what
// assign and rollout start print with --dry-run. A node whose agent would
// refuse the config as allow stands, or whose config cannot be read, is a
// warning; so is a class of allow that the config changes on no node. A
// field the config leaves out keeps what the node runs
// (kubeletconfig.NeedsOptIn). A config that takes a declared feature away
// from a node names the running pods there that rely on it, when the
// caller may list them. A payload that does not decode is left to the
// agents to refuse.
func ReportOptIns(ctx context.Context, client kubernetes.Interface, nodes []corev1.Node, payload []byte, allow []string, w io.Writer) {
	if _, _, err := kubeletconfig.Decode(payload, kubeletconfig.DecodeOptions{AllowUnknownFields: true}); err != nil {
		return
	}
	allowed := make([]kubeletconfig.SafetyClass, len(allow))
	for i, c := range allow {
		allowed[i] = kubeletconfig.SafetyClass(c)
	}
	var all []kubeletconfig.Change
	known := true
	for i := range nodes {
		name := nodes[i].Name
		live, err := configz.Running(ctx, client.CoreV1().RESTClient(), name)
		if err != nil {
			known = false
			fmt.Fprintf(w, "Warning: node/%s: what the config changes there is not known: %v\n", name, err)
			continue
		}
		changes, err := kubeletconfig.NeedsOptIn(live, payload, kubeletconfig.NodeFacts{DeclaredFeatures: nodes[i].Status.DeclaredFeatures})
		if err != nil {
			known = false
			fmt.Fprintf(w, "Warning: node/%s: what the config changes there is not known: %v\n", name, err)
			continue
		}
		if takesFeatures(changes) {
			pods, err := podFeatures(ctx, client, name)
			if err != nil {
				fmt.Fprintf(w, "Warning: node/%s: the running pods that rely on the declared features the config takes away are not known: %v\n", name, err)
			} else if changes, err = kubeletconfig.NeedsOptIn(live, payload, kubeletconfig.NodeFacts{DeclaredFeatures: nodes[i].Status.DeclaredFeatures, PodFeatures: pods}); err != nil {
				return // decoded above
			}
		}
		all = append(all, changes...)
		text, refused := kubeletconfig.OptInReport(changes, allowed)
		if refused {
			fmt.Fprintf(w, "Warning: node/%s %s\n", name, text)
			continue
		}
		fmt.Fprintf(w, "node/%s %s\n", name, text)
	}
	if unused := kubeletconfig.UnusedClasses(allowed, all); known && len(unused) > 0 {
		fmt.Fprintf(w, "Warning: --allow-unsafe allows %s, which the config changes on none of these nodes: leave it out\n", joinClasses(unused))
	}
}

// takesFeatures reports whether changes take a declared feature away from
// the node.
func takesFeatures(changes []kubeletconfig.Change) bool {
	for _, c := range changes {
		if c.Class == kubeletconfig.DeclaredFeatures && c.Old != "" {
			return true
		}
	}
	return false
}

// podFeatures returns, by namespace/name, the declared features each pod
// bound to node that is not terminal relies on (kubeletconfig.PodFeatures).
func podFeatures(ctx context.Context, client kubernetes.Interface, node string) (map[string][]string, error) {
	pods, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return nil, err
	}
	running := make([]*corev1.Pod, len(pods.Items))
	for i := range pods.Items {
		running[i] = &pods.Items[i]
	}
	return kubeletconfig.RunningPodFeatures(running, kubeletconfig.PodFeatures), nil
}

func joinClasses(classes []kubeletconfig.SafetyClass) string {
	names := make([]string, len(classes))
	for i, c := range classes {
		names[i] = string(c)
	}
	return strings.Join(names, ",")
}
