package install

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dkc/dkc/pkg/controller"
	"github.com/kubectl-dkc/dkc/pkg/pool"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// What Delete did to an object.
const (
	Deleted  = "deleted"
	NotFound = "not found"
)

// Installed is every object an install may have created, with either
// agent: what uninstall removes, in the order install applies them.
func Installed() ([]*unstructured.Unstructured, error) {
	seen := map[string]bool{}
	var all []*unstructured.Unstructured
	for _, agent := range Agents {
		objs, err := Render(Options{ImageRepository: PlaceholderRegistry, Version: "uninstall", Agent: agent})
		if err != nil {
			return nil, err
		}
		for _, obj := range objs {
			k := obj.GroupVersionKind().GroupKind().String() + " " + obj.GetNamespace() + "/" + obj.GetName()
			if !seen[k] {
				seen[k] = true
				all = append(all, obj)
			}
		}
	}
	return all, nil
}

// Blockers are what keeps uninstall from removing dkc: objects and
// assignments that the cluster would lose track of.
type Blockers struct {
	// Rollouts and Pools are namespace/name of every NodeConfigRollout
	// and NodeConfigPool.
	Rollouts, Pools []string
	// Assigned are the nodes that hold an assignment.
	Assigned []string
	// NotLocal are nodes without an assignment whose agent still reports
	// an assigned config active: a reset under way.
	NotLocal []string
}

// FindBlockers reads the cluster's rollouts, pools and nodes.
func FindBlockers(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface) (Blockers, error) {
	var b Blockers
	var err error
	if b.Rollouts, err = listAll(ctx, dyn, rollout.Resource); err != nil {
		return b, err
	}
	if b.Pools, err = listAll(ctx, dyn, pool.Resource); err != nil {
		return b, err
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return b, fmt.Errorf("list nodes: %w", err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		src, _, err := source.Assigned(n)
		if err != nil || src != nil {
			b.Assigned = append(b.Assigned, n.Name)
			continue
		}
		if st, _, err := source.Status(n); err == nil && st != nil && st.Active != nil {
			b.NotLocal = append(b.NotLocal, n.Name)
		}
	}
	return b, nil
}

// listAll returns namespace/name of every object of gvr, none when the
// cluster does not serve it.
func listAll(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource) ([]string, error) {
	list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", gvr.GroupResource(), err)
	}
	var names []string
	for _, o := range list.Items {
		names = append(names, o.GetNamespace()+"/"+o.GetName())
	}
	return names, nil
}

// Err is the refusal of uninstall, or nil: rollouts or pools exist, or a
// node holds an assignment (unless resetNodes, which resets them first),
// or a node has not gone back to its local config yet.
func (b Blockers) Err(resetNodes bool) error {
	var why []string
	if len(b.Rollouts) > 0 {
		why = append(why, fmt.Sprintf("rollouts exist (%s): delete them with kubectl delete nodeconfigrollouts -A --all once you no longer need their history", list(b.Rollouts)))
	}
	if len(b.Pools) > 0 {
		why = append(why, fmt.Sprintf("pools exist (%s): delete them with kubectl delete nodeconfigpools -A --all; their nodes keep their config until reset", list(b.Pools)))
	}
	if len(b.Assigned) > 0 && !resetNodes {
		why = append(why, fmt.Sprintf("nodes hold an assignment (%s): add --reset-nodes to send them back to their local config first, a few at a time", list(b.Assigned)))
	}
	if len(b.NotLocal) > 0 {
		why = append(why, fmt.Sprintf("nodes have not gone back to their local config yet (%s): wait with kubectl dkc status --wait-for=active", list(b.NotLocal)))
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("uninstall refused: %s", strings.Join(why, "; "))
}

func list(names []string) string {
	if len(names) > 5 {
		return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d more", len(names)-5)
	}
	return strings.Join(names, ", ")
}

// DeleteAll deletes objs in the reverse of their order (what depends on
// the others first, the CRDs last), each with foreground propagation, so
// that a workload's pods go with it, and waits until every one is gone.
// report hears what Delete did to each.
func (a *Applier) DeleteAll(ctx context.Context, objs []*unstructured.Unstructured, timeout time.Duration, report func(obj *unstructured.Unstructured, outcome string) error) error {
	policy := metav1.DeletePropagationForeground
	for _, obj := range slices.Backward(objs) {
		ri, err := a.resource(obj)
		if err != nil {
			if meta.IsNoMatchError(err) {
				continue // the kind is not served: nothing of it exists
			}
			return err
		}
		outcome := Deleted
		err = ri.Delete(ctx, obj.GetName(), metav1.DeleteOptions{PropagationPolicy: &policy})
		switch {
		case apierrors.IsNotFound(err):
			outcome = NotFound
		case err != nil:
			return fmt.Errorf("delete %s: %w", describe(obj), err)
		}
		if err := report(obj, outcome); err != nil {
			return err
		}
	}
	// What is still there, as the last complete look found it; an object
	// once gone is not asked about again.
	left := map[string]*unstructured.Unstructured{}
	for _, obj := range objs {
		left[describe(obj)] = obj
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		for name, obj := range left {
			ri, err := a.resource(obj)
			if err != nil {
				delete(left, name) // its kind is no longer served: gone with its CRD
				continue
			}
			_, err = ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				delete(left, name)
			case ctx.Err() != nil:
				return false, nil
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		names := slices.Sorted(maps.Keys(left))
		return fmt.Errorf("%d objects are not gone after %s: %s (a foreground deletion waits for kube-controller-manager's garbage collector to delete what they own): %w", len(names), timeout, list(names), err)
	}
	return nil
}

// DeleteLease deletes the controller's Lease in namespace, which the
// controller made and no manifest names.
func DeleteLease(ctx context.Context, client kubernetes.Interface, namespace string) (bool, error) {
	err := client.CoordinationV1().Leases(namespace).Delete(ctx, controller.LeaseName, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("delete lease %s/%s: %w", namespace, controller.LeaseName, err)
	}
	return true, nil
}

// CleanNodes removes from every Node each annotation and label under
// source.Prefix, the condition source.ConditionType and the startup taint
// source.StartupTaint, and returns the names of the nodes it changed.
func CleanNodes(ctx context.Context, client kubernetes.Interface) ([]string, error) {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var changed []string
	for i := range nodes.Items {
		n := &nodes.Items[i]
		metadata, status := CleanPatches(n)
		pending := source.Pending(n)
		if metadata == nil && status == nil && !pending {
			continue
		}
		opts := metav1.PatchOptions{FieldManager: source.FieldManager}
		if metadata != nil {
			if _, err := client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, metadata, opts); err != nil {
				return changed, fmt.Errorf("clean node %q: %w", n.Name, err)
			}
		}
		if status != nil {
			if _, err := client.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, status, opts, "status"); err != nil {
				return changed, fmt.Errorf("clean node %q: status: %w", n.Name, err)
			}
		}
		// Nothing would take dkc's startup taint off a node any more.
		if pending {
			if err := source.RemoveStartupTaint(ctx, client.CoreV1().Nodes(), n.Name, nil); err != nil {
				return changed, fmt.Errorf("clean node %q: %w", n.Name, err)
			}
		}
		changed = append(changed, n.Name)
	}
	return changed, nil
}

// CleanPatches are the patches that take dkc off node: a merge patch of
// its metadata that deletes dkc's annotations and labels, and a strategic
// merge patch of its status that deletes dkc's condition; nil when there
// is nothing to delete.
func CleanPatches(node *corev1.Node) (metadata, status []byte) {
	annotations, labels := map[string]any{}, map[string]any{}
	for k := range node.Annotations {
		if strings.HasPrefix(k, source.Prefix) {
			annotations[k] = nil
		}
	}
	for k := range node.Labels {
		if strings.HasPrefix(k, source.Prefix) {
			labels[k] = nil
		}
	}
	if len(annotations) > 0 || len(labels) > 0 {
		m := map[string]any{}
		if len(annotations) > 0 {
			m["annotations"] = annotations
		}
		if len(labels) > 0 {
			m["labels"] = labels
		}
		metadata, _ = json.Marshal(map[string]any{"metadata": m})
	}
	for _, c := range node.Status.Conditions {
		if c.Type == source.ConditionType {
			status, _ = json.Marshal(map[string]any{"status": map[string]any{
				"conditions": []any{map[string]any{"type": string(source.ConditionType), "$patch": "delete"}},
			}})
			break
		}
	}
	return metadata, status
}
