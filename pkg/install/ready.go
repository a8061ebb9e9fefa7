package install

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/kubectl-dkc/dkc/pkg/controller"
)

// Workloads are the controller's Deployment and the agent's DaemonSet of
// a rendering: what an install waits for.
type Workloads struct {
	Controller *appsv1.Deployment
	// Agent is nil when the agent runs as a systemd unit.
	Agent *appsv1.DaemonSet
}

// FindWorkloads picks the controller's Deployment and the agent's
// DaemonSet out of objs.
func FindWorkloads(objs []*unstructured.Unstructured) (Workloads, error) {
	var w Workloads
	for _, obj := range objs {
		var err error
		switch obj.GroupVersionKind() {
		case appsv1.SchemeGroupVersion.WithKind("Deployment"):
			w.Controller = &appsv1.Deployment{}
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, w.Controller)
		case appsv1.SchemeGroupVersion.WithKind("DaemonSet"):
			w.Agent = &appsv1.DaemonSet{}
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, w.Agent)
		}
		if err != nil {
			return w, fmt.Errorf("%s: %w", describe(obj), err)
		}
	}
	if w.Controller == nil {
		return w, fmt.Errorf("deploy/ has no Deployment of the controller")
	}
	return w, nil
}

// Readiness is how far an install has come.
type Readiness struct {
	// Leader is the controller replica that holds the Lease, when it is a
	// Ready pod of the Deployment as applied ("" until then).
	Leader string
	// ControllerWaiting says what the controller still waits for.
	ControllerWaiting string
	// Nodes are every node's name; Ready those with a Ready agent pod of
	// the DaemonSet as applied.
	Nodes, Ready []string
	// AgentWaiting says what the DaemonSet still waits for.
	AgentWaiting string
	// Agents is whether the install has agent pods to wait for.
	Agents bool
}

// Done reports whether the controller leads and every node runs a Ready
// agent.
func (r Readiness) Done() bool {
	return r.Leader != "" && r.ControllerWaiting == "" && (!r.Agents || r.AgentWaiting == "" && len(r.Ready) == len(r.Nodes))
}

// String says where the install stands, in one line.
func (r Readiness) String() string {
	var parts []string
	switch {
	case r.ControllerWaiting != "":
		parts = append(parts, "controller: "+r.ControllerWaiting)
	case r.Leader == "":
		parts = append(parts, "controller: no leader yet")
	default:
		parts = append(parts, "controller: leader "+r.Leader)
	}
	if r.Agents {
		s := fmt.Sprintf("agents: %d of %d nodes Ready", len(r.Ready), len(r.Nodes))
		if missing := r.Missing(); len(missing) > 0 && len(missing) <= 5 {
			s += " (waiting for " + strings.Join(missing, ", ") + ")"
		}
		if r.AgentWaiting != "" {
			s += ", " + r.AgentWaiting
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// Missing are the nodes without a Ready agent.
func (r Readiness) Missing() []string {
	var missing []string
	for _, n := range r.Nodes {
		if !slices.Contains(r.Ready, n) {
			missing = append(missing, n)
		}
	}
	return missing
}

// Observe reads how far w has come, as of now.
func Observe(ctx context.Context, client kubernetes.Interface, w Workloads, now time.Time) (Readiness, error) {
	var r Readiness
	ns := w.Controller.Namespace
	d, err := client.AppsV1().Deployments(ns).Get(ctx, w.Controller.Name, metav1.GetOptions{})
	if err != nil {
		return r, fmt.Errorf("read deployment %s/%s: %w", ns, w.Controller.Name, err)
	}
	r.ControllerWaiting = deploymentWaiting(d)
	leader, err := controller.Leader(ctx, client, ns, now)
	if err != nil {
		return r, err
	}
	if leader != "" {
		p, err := client.CoreV1().Pods(ns).Get(ctx, leader, metav1.GetOptions{})
		if err == nil && current(p, &w.Controller.Spec.Template) {
			r.Leader = leader
		}
	}
	if w.Agent == nil {
		return r, nil
	}
	r.Agents = true
	ds, err := client.AppsV1().DaemonSets(w.Agent.Namespace).Get(ctx, w.Agent.Name, metav1.GetOptions{})
	if err != nil {
		return r, fmt.Errorf("read daemonset %s/%s: %w", w.Agent.Namespace, w.Agent.Name, err)
	}
	r.AgentWaiting = daemonSetWaiting(ds)
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return r, fmt.Errorf("list nodes: %w", err)
	}
	sel, err := metav1.LabelSelectorAsSelector(w.Agent.Spec.Selector)
	if err != nil {
		return r, err
	}
	pods, err := client.CoreV1().Pods(w.Agent.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return r, fmt.Errorf("list the agent's pods: %w", err)
	}
	ready := map[string]bool{}
	for i := range pods.Items {
		if p := &pods.Items[i]; current(p, &w.Agent.Spec.Template) {
			ready[p.Spec.NodeName] = true
		}
	}
	for _, n := range nodes.Items {
		r.Nodes = append(r.Nodes, n.Name)
		if ready[n.Name] {
			r.Ready = append(r.Ready, n.Name)
		}
	}
	slices.Sort(r.Nodes)
	slices.Sort(r.Ready)
	return r, nil
}

// current reports whether p is Ready, not being deleted, and runs the
// images of template.
func current(p *corev1.Pod, template *corev1.PodTemplateSpec) bool {
	if p.DeletionTimestamp != nil || !podutils.IsPodReady(p) {
		return false
	}
	want := map[string]string{}
	for _, c := range template.Spec.Containers {
		want[c.Name] = c.Image
	}
	for _, c := range p.Spec.Containers {
		if want[c.Name] != c.Image {
			return false
		}
	}
	return len(p.Spec.Containers) == len(want)
}

// deploymentWaiting says what d's rollout waits for, or "" once it is
// complete, in the terms of kubectl rollout status.
func deploymentWaiting(d *appsv1.Deployment) string {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	switch s := d.Status; {
	case d.Generation > s.ObservedGeneration:
		return "waiting for the deployment's spec to be observed"
	case s.UpdatedReplicas < want:
		return fmt.Sprintf("%d of %d new replicas updated", s.UpdatedReplicas, want)
	case s.Replicas > s.UpdatedReplicas:
		return fmt.Sprintf("%d old replicas pending termination", s.Replicas-s.UpdatedReplicas)
	case s.AvailableReplicas < s.UpdatedReplicas:
		return fmt.Sprintf("%d of %d updated replicas available", s.AvailableReplicas, s.UpdatedReplicas)
	}
	return ""
}

// daemonSetWaiting says what ds's rollout waits for, or "" once it is
// complete, in the terms of kubectl rollout status.
func daemonSetWaiting(ds *appsv1.DaemonSet) string {
	switch s := ds.Status; {
	case ds.Generation > s.ObservedGeneration:
		return "waiting for the daemon set's spec to be observed"
	case s.UpdatedNumberScheduled < s.DesiredNumberScheduled:
		return fmt.Sprintf("%d of %d pods updated", s.UpdatedNumberScheduled, s.DesiredNumberScheduled)
	case s.NumberAvailable < s.DesiredNumberScheduled:
		return fmt.Sprintf("%d of %d updated pods available", s.NumberAvailable, s.DesiredNumberScheduled)
	}
	return ""
}
