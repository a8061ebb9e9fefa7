package rollout

import (
	"context"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/drain"
)

// Drainer empties a node before its kubelet restarts on a config that needs
// it (see NeedsDrain). The driver cordons the node first, in the patch that
// marks it, and uncordons it after the health gate.
type Drainer interface {
	// Drain cordons node, if it is not already, and evicts its pods.
	Drain(ctx context.Context, node string) error
}

// DrainOptions are the knobs of KubeDrainer, named after kubectl drain's
// flags.
type DrainOptions struct {
	// Timeout bounds the eviction of a node's pods; 0 means forever.
	Timeout time.Duration
	// Force evicts pods that no controller manages (kubectl drain --force).
	Force bool
	// DeleteEmptyDirData evicts pods with emptyDir volumes, whose data is
	// lost (kubectl drain --delete-emptydir-data).
	DeleteEmptyDirData bool
	// GracePeriodSeconds overrides the pods' own when not negative.
	GracePeriodSeconds int
}

// KubeDrainer drains with k8s.io/kubectl/pkg/drain, the library of kubectl
// drain: pods leave through the eviction API, so PodDisruptionBudgets hold.
// DaemonSet pods are always left alone: the dkc agent is one of them.
type KubeDrainer struct {
	Client  kubernetes.Interface
	Options DrainOptions
	// Out receives one line per evicted pod; nil discards them.
	Out io.Writer
}

var _ Drainer = &KubeDrainer{}

func (d *KubeDrainer) helper(ctx context.Context) *drain.Helper {
	out := d.Out
	if out == nil {
		out = io.Discard
	}
	return &drain.Helper{
		Ctx:                 ctx,
		Client:              d.Client,
		Force:               d.Options.Force,
		GracePeriodSeconds:  d.Options.GracePeriodSeconds,
		IgnoreAllDaemonSets: true,
		Timeout:             d.Options.Timeout,
		DeleteEmptyDirData:  d.Options.DeleteEmptyDirData,
		Out:                 out,
		ErrOut:              out,
		OnPodDeletedOrEvicted: func(pod *corev1.Pod, usingEviction bool) {
			verb := "deleted"
			if usingEviction {
				verb = "evicted"
			}
			fmt.Fprintf(out, "pod/%s %s from node/%s\n", pod.Name, verb, pod.Spec.NodeName)
		},
	}
}

// Drain cordons node and evicts its pods.
func (d *KubeDrainer) Drain(ctx context.Context, node string) error {
	if err := d.cordon(ctx, node, true); err != nil {
		return err
	}
	if err := drain.RunNodeDrain(d.helper(ctx), node); err != nil {
		return fmt.Errorf("drain node %q: %w", node, err)
	}
	return nil
}

func (d *KubeDrainer) cordon(ctx context.Context, name string, unschedulable bool) error {
	verb := "cordon"
	if !unschedulable {
		verb = "uncordon"
	}
	node, err := d.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("%s node %q: %w", verb, name, err)
	}
	if err := drain.RunCordonOrUncordon(d.helper(ctx), node, unschedulable); err != nil {
		return fmt.Errorf("%s node %q: %w", verb, name, err)
	}
	return nil
}
