// The kubelet's flags on the Node: which config fields the kubelet's
// command-line flags set, read from its /flagz and kept in
// flagz.Annotation, so that assign and rollout start refuse a config that
// cannot take effect from the Node objects alone, with no read of each
// kubelet through the apiserver's node proxy.

package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/kubectl-dkc/dkc/pkg/flagz"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// flagsRetry is when a sync whose write of the flags' record failed syncs
// again. A read that fails waits for the next drift check, as a kubelet
// that does not answer would fail it again at once.
const flagsRetry = 10 * time.Second

// flagsDue reports whether the kubelet's flags are to be read: never read
// yet, read before the kubelet's last restart (flags change only when the
// kubelet starts), or read a drift check interval ago, for a restart by
// someone else.
func (a *Agent) flagsDue() bool {
	if a.flagsRead.IsZero() {
		return true
	}
	return a.DriftCheckInterval > 0 && a.Clock.Since(a.flagsRead) >= a.DriftCheckInterval
}

// publishFlags records on node which config fields its kubelet's flags set
// (flagz.Annotation), when due (flagsDue) and changed; a kubelet that does
// not serve /flagz leaves no annotation. node is updated to what the
// apiserver returned. What fails stays due: a failed write asks for a sync
// within retry (flagsRetry), a failed read waits for the next sync.
func (a *Agent) publishFlags(ctx context.Context, node *corev1.Node) (retry time.Duration, err error) {
	if !a.flagsDue() {
		return 0, nil
	}
	current, err := a.Writer.Effective()
	if err != nil {
		return 0, fmt.Errorf("read kubelet config: %w", err)
	}
	flags, err := a.Prober.Flags(ctx, current)
	var want *string // nil: no annotation
	switch {
	case errors.Is(err, flagz.ErrNotServed):
	case err != nil:
		return 0, fmt.Errorf("read the kubelet's flags: %w", err)
	default:
		v := flagz.Encode(flagz.Shadowed(flags))
		want = &v
	}
	have, ok := node.Annotations[flagz.Annotation]
	if ok == (want != nil) && (want == nil || have == *want) {
		a.flagsRead = a.Clock.Now()
		return 0, nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]*string{flagz.Annotation: want}}})
	if err != nil {
		return 0, err
	}
	updated, err := a.Client.Nodes().Patch(ctx, node.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: source.FieldManager}, "status")
	if err != nil {
		return flagsRetry, fmt.Errorf("patch node %q status: %w", node.Name, err)
	}
	a.flagsRead = a.Clock.Now()
	*node = *updated
	klog.FromContext(ctx).V(2).Info("Recorded the config fields the kubelet's flags set", "annotation", flagz.Annotation, "value", want)
	return 0, nil
}
