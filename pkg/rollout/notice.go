// Notices: while the nodes of a pass start, a node may wait minutes on
// something outside the rollout (a drain whose eviction a
// PodDisruptionBudget refuses, a budget to allow the restart of a kubelet
// of 1.34 or older). The pass is blocked meanwhile, so the driver says why
// in the rollout's status.reason ("node/NAME: WHAT"), which `rollout status`
// and the controller's pool condition show. It writes it when what a node
// waits for changes, not on every retry, and clears it once the nodes have
// started.

package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/klog/v2"
)

// maxNotices bounds how many waiting nodes status.reason names.
const maxNotices = 3

// notices are what keeps each node that the current pass starts from
// progressing, and the rollout as the driver last wrote it during the pass.
type notices struct {
	mu     sync.Mutex
	byNode map[string]string
	// base is the rollout as last written (its resourceVersion the one to
	// write over); nil when no write is to be tried: outside a pass's
	// starts, or after a write lost to another client's.
	base *Rollout
	// wrote: base was written during this pass.
	wrote bool
}

// begin opens the notices of a pass that starts nodes of r.
func (n *notices) begin(r *Rollout) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.byNode, n.base, n.wrote = map[string]string{}, r.DeepCopy(), false
}

// end closes the pass's notices. When some were written, it returns the
// rollout as last written, whose resourceVersion the pass writes over.
func (n *notices) end() *Rollout {
	n.mu.Lock()
	defer n.mu.Unlock()
	written := n.base
	if !n.wrote {
		written = nil
	}
	n.byNode, n.base, n.wrote = nil, nil, false
	return written
}

// note records that node waits for what ("" when it no longer waits), and
// writes the rollout's reason when that changes it.
func (e *engine) note(ctx context.Context, node, what string) {
	n := &e.notices
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.byNode == nil || n.byNode[node] == what {
		return
	}
	if what == "" {
		delete(n.byNode, node)
	} else {
		n.byNode[node] = what
	}
	if n.base == nil {
		return
	}
	reason := noticeReason(n.byNode)
	if reason == n.base.Status.Reason {
		return
	}
	r := n.base.DeepCopy()
	r.Status.Reason = reason
	got, err := e.store.UpdateStatus(ctx, r)
	if err != nil {
		if !errors.Is(err, ErrConflict) {
			klog.FromContext(ctx).Error(err, "Write why a node waits", "rollout", r.Name, "node", node)
			return
		}
		n.base = nil // another client wrote it: the next pass decides again
		return
	}
	got.Status.Nodes = r.Status.Nodes
	n.base, n.wrote = got, true
}

// noticeReason is status.reason for the waits in byNode: the first
// maxNotices nodes, by name.
func noticeReason(byNode map[string]string) string {
	nodes := make([]string, 0, len(byNode))
	for node := range byNode {
		nodes = append(nodes, node)
	}
	slices.Sort(nodes)
	parts := make([]string, 0, maxNotices)
	for _, node := range nodes[:min(len(nodes), maxNotices)] {
		parts = append(parts, "node/"+node+": "+byNode[node])
	}
	reason := strings.Join(parts, "; ")
	if len(nodes) > maxNotices {
		reason += fmt.Sprintf("; and %d more nodes waiting", len(nodes)-maxNotices)
	}
	return reason
}

// isNotice reports whether reason, of a running rollout, is one a driver
// wrote while a node waited: a driver that stopped meanwhile left it.
func isNotice(reason string) bool {
	return strings.HasPrefix(reason, "node/")
}
