package status

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kubectl-dkc/dkc/pkg/kubeclient"
)

// Scope is the set of nodes a Watch covers.
type Scope struct {
	// Names lists the nodes. Empty means every node LabelSelector selects,
	// including nodes that join during the watch.
	Names []string
	// LabelSelector narrows the watch on the server; empty selects all nodes.
	LabelSelector string
}

// listOptions narrows opts to the scope on the server: one named node by
// field selector, else the label selector. Several named nodes are filtered
// on the client.
func (s Scope) listOptions(opts *metav1.ListOptions) {
	if len(s.Names) == 1 {
		opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", s.Names[0]).String()
	}
	opts.LabelSelector = s.LabelSelector
}

// covers reports whether the node named name is in the scope.
func (s Scope) covers(name string) bool {
	return len(s.Names) == 0 || slices.Contains(s.Names, name)
}

// WatchFunc receives the NodeConfigs that changed since its last call, and
// all NodeConfigs of the scope, both sorted by node name. The first call
// comes after the initial list, with every node as changed. A node that
// leaves the scope or is deleted is no longer in all. WatchFunc returns true
// to end the watch, or an error to end it with that error.
type WatchFunc func(changed, all []NodeConfig) (done bool, err error)

// Watch lists and then watches the nodes of scope, and calls fn with every
// change of their NodeConfig (FromNode); changes of a node that leave its
// NodeConfig alone, such as heartbeats, are not reported. It uses client-go's
// watchtools.UntilWithSync, an informer that relists and rewatches when the
// watch breaks. Watch returns nil when fn says done, fn's error, or ctx's
// error wrapped when ctx ends first.
func Watch(ctx context.Context, client kubeclient.Interface, scope Scope, fn WatchFunc) error {
	lw := kubeclient.NodeListWatch(client, scope.listOptions)
	seen := map[string]NodeConfig{}
	all := func() []NodeConfig {
		items := make([]NodeConfig, 0, len(seen))
		for _, item := range seen {
			items = append(items, item)
		}
		return sorted(items)
	}
	// The informer's store is never older than the event being handled,
	// and may be newer: events still queued behind it can be stale. So an
	// event only names a node, and its NodeConfig is read from the store.
	var store cache.Store
	// update records the node named name (a Node's store key is its name)
	// and reports its NodeConfig when it changed.
	update := func(name string) (*NodeConfig, error) {
		if !scope.covers(name) {
			return nil, nil
		}
		obj, exists, err := store.GetByKey(name)
		if err != nil {
			return nil, err
		}
		if !exists {
			delete(seen, name)
			return nil, nil
		}
		item, err := FromNode(obj.(*corev1.Node))
		if err != nil {
			return nil, err
		}
		if old, ok := seen[name]; ok && apiequality.Semantic.DeepEqual(old, item) {
			return nil, nil
		}
		seen[name] = item
		return &item, nil
	}
	// fnErr keeps fn's error apart from the watch's own.
	var fnErr error
	call := func(changed []NodeConfig) (bool, error) {
		done, err := fn(changed, all())
		fnErr = err
		return done, err
	}
	precondition := func(s cache.Store) (bool, error) {
		store = s
		var changed []NodeConfig
		for _, key := range s.ListKeys() {
			item, err := update(key)
			if err != nil {
				return false, err
			}
			if item != nil {
				changed = append(changed, *item)
			}
		}
		return call(sorted(changed))
	}
	condition := func(event watch.Event) (bool, error) {
		node, ok := event.Object.(*corev1.Node)
		if !ok {
			return false, nil
		}
		_, had := seen[node.Name]
		item, err := update(node.Name)
		_, has := seen[node.Name]
		switch {
		case err != nil:
			return false, err
		case item != nil:
			return call([]NodeConfig{*item})
		case had && !has:
			// The node left: all changed, though no node did.
			return call(nil)
		}
		return false, nil
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Node{}, precondition, condition)
	if fnErr != nil {
		return fnErr
	}
	if err != nil && ctx.Err() != nil && (wait.Interrupted(err) || errors.Is(err, ctx.Err())) {
		return fmt.Errorf("watch nodes: %w", ctx.Err())
	}
	if err != nil {
		return fmt.Errorf("watch nodes: %w", err)
	}
	return nil
}

// Wait watches the nodes named in names until every one of them reached want
// (see ReachedAll), and returns their last NodeConfigs. It fails with an
// error matching ErrConfigError as soon as a node reports an error for the
// config requested of it, and with one matching ErrTimeout, naming the nodes
// still pending, when timeout passes first (0 means no timeout). A named node
// that does not exist counts as pending. onChange, when not nil, receives the
// NodeConfigs that changed, as Watch reports them.
func Wait(ctx context.Context, client kubeclient.Interface, names []string, want string, timeout time.Duration, onChange func(changed []NodeConfig)) ([]NodeConfig, error) {
	if err := ValidateWaitFor(want); err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, errors.New("wait: no nodes given")
	}
	waitCtx, cancel := watchtools.ContextWithOptionalTimeout(ctx, timeout)
	defer cancel()

	var last []NodeConfig
	pending := slices.Sorted(slices.Values(names))
	err := Watch(waitCtx, client, Scope{Names: names}, func(changed, all []NodeConfig) (bool, error) {
		last = all
		if onChange != nil && len(changed) > 0 {
			onChange(changed)
		}
		var failed error
		pending, failed = ReachedAll(all, want)
		for _, name := range names {
			if !slices.ContainsFunc(all, func(item NodeConfig) bool { return item.Name == name }) {
				pending = append(pending, name)
			}
		}
		slices.Sort(pending)
		if failed != nil {
			return false, failed
		}
		return len(pending) == 0, nil
	})
	switch {
	case err == nil:
		return last, nil
	case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		return last, fmt.Errorf("wait for %s: %w after %s: pending %s", want, ErrTimeout, timeout, pendingList(pending, last))
	}
	return last, err
}

// pendingList shows names as node/NAME, comma-separated, each followed by
// the cause when items show one: no agent, or a stale one.
func pendingList(names []string, items []NodeConfig) string {
	agents := map[string]AgentState{}
	for _, item := range items {
		agents[item.Name] = item.Agent
	}
	out := make([]string, len(names))
	for i, name := range names {
		out[i] = "node/" + name
		if cause := AgentCause(agents[name]); cause != "" {
			out[i] += " (" + cause + ")"
		}
	}
	return strings.Join(out, ", ")
}

// AgentCause says why a node in state a does not take up its assignment,
// or "" when a does not explain it.
func AgentCause(a AgentState) string {
	switch a {
	case AgentNone:
		return "no dkc agent has reported on it; " + InstallHint
	case AgentStale:
		return fmt.Sprintf("its dkc agent has not taken up the assignment for over %s; check the agent", StaleAfter)
	case AgentVerifying:
		return "its dkc agent's health gate is waiting for Ready from the restarted kubelet"
	}
	return ""
}
