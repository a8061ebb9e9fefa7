package util

import (
	"context"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
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
// (kubeletconfig.NeedsOptIn). A payload that does not decode is left to the
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
		changes, err := kubeletconfig.NeedsOptIn(live, payload)
		if err != nil {
			known = false
			fmt.Fprintf(w, "Warning: node/%s: what the config changes there is not known: %v\n", name, err)
			continue
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

func joinClasses(classes []kubeletconfig.SafetyClass) string {
	names := make([]string, len(classes))
	for i, c := range classes {
		names[i] = string(c)
	}
	return strings.Join(names, ",")
}
