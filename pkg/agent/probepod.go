package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// The new-pod check. Some settings reach only pods created after the
// kubelet started on them: podPidsLimit is set on a pod's cgroup when the
// cgroup is made, and seccomp defaults, runtime handlers and most of what a
// runtime reads at container start are read then. A gate that looks only at
// the pods that ran before the restart passes them. So, when ProbePod is
// set, the health gate also starts a pod on the node after the restart and
// waits for it to run and turn Ready; a config under which it cannot is
// rolled back.
//
// The pod comes from a PodTemplate (deploy/probe-pod.yaml: the probe image
// of hack/image, which starts processes of its own before it serves its
// readiness probe), bound to the node by spec.nodeName, in the agent's
// namespace, named after the node (probePodName). So that the environment
// (an image that cannot be pulled, a quota, a full node) never rolls back a
// healthy kubelet, the same pod must first run and turn Ready before the
// restart: when it does not, the agent records a ProbePodUnavailable Event,
// logs why, and gates without the check. An apiserver that does not answer
// after the restart does not roll back either. The pod is deleted after
// each run, and a pod left by an agent that died is deleted before each run
// and at the agent's start.

// ProbePod configures the new-pod check; a nil Agent.ProbePod turns it off.
type ProbePod struct {
	// Namespace holds the template and the probe pod: the agent's own.
	Namespace string
	// Template is the name of the PodTemplate the probe pod is made from.
	Template string
}

// ProbePodLabel marks the agent's probe pods; its value is "true".
// deploy/admission-policy.yaml lets the agent delete only pods that carry
// it, on its own node.
const ProbePodLabel = "kubectl-dkc.io/probe-pod"

// ReasonProbePodUnavailable is the reason of the Warning Event the agent
// records when its probe pod did not run and turn Ready before a restart:
// it cannot judge new pods on the config it applies, and gates without
// that check. It is never a condition reason.
const ReasonProbePodUnavailable = "ProbePodUnavailable"

// probePollInterval is the wait between the new-pod check's reads of its
// pod.
const probePollInterval = time.Second

// probePodName is the name of the probe pod of node: dkc-probe-NODE, cut
// and suffixed with a hash of the node's name when that is longer than a
// pod's name may be.
func probePodName(node string) string {
	const prefix, max = "dkc-probe-", 253
	name := prefix + node
	if len(name) <= max {
		return name
	}
	sum := sha256.Sum256([]byte(node))
	return strings.TrimRight(name[:max-11], ".-") + "-" + hex.EncodeToString(sum[:])[:10]
}

// probeResult is what a run of the probe pod showed.
type probeResult struct {
	// failed says why the pod did not run and turn Ready, as its kubelet
	// reported it: a verdict on the node.
	failed string
	// unjudged says why there is no verdict: no template, or the
	// apiserver did not answer.
	unjudged error
}

// runProbePod creates the probe pod, waits up to PodReadyTimeout for it to
// be Ready, and deletes it.
func (a *Agent) runProbePod(ctx context.Context) probeResult {
	p := a.ProbePod
	logger := klog.FromContext(ctx)
	name := probePodName(a.NodeName)
	gctx, cancel := context.WithTimeout(ctx, getTimeout)
	tmpl, err := a.Client.PodTemplates(p.Namespace).Get(gctx, p.Template, metav1.GetOptions{})
	cancel()
	if err != nil {
		return probeResult{unjudged: fmt.Errorf("read the probe pod's PodTemplate %s/%s: %w", p.Namespace, p.Template, err)}
	}
	a.deleteProbePod(ctx)
	pod := probePod(tmpl, name, a.NodeName)
	cctx, cancel := context.WithTimeout(ctx, getTimeout)
	_, err = a.Client.Pods(p.Namespace).Create(cctx, pod, metav1.CreateOptions{FieldManager: "kubectl-dkc-agent"})
	cancel()
	if err != nil {
		return probeResult{unjudged: fmt.Errorf("create probe pod %s/%s: %w", p.Namespace, name, err)}
	}
	defer a.deleteProbePod(context.WithoutCancel(ctx))
	began := a.Clock.Now()
	var state string
	var readErr error
	for {
		gctx, cancel := context.WithTimeout(ctx, getTimeout)
		got, err := a.Client.Pods(p.Namespace).Get(gctx, name, metav1.GetOptions{})
		cancel()
		if err == nil {
			readErr = nil
			ready, failed, s := probePodState(got)
			switch {
			case ready:
				logger.V(2).Info("The probe pod is Ready", "pod", p.Namespace+"/"+name, "waited", a.Clock.Since(began))
				return probeResult{}
			case failed:
				return probeResult{failed: fmt.Sprintf("new pod %s/%s did not run: %s", p.Namespace, name, s)}
			}
			state = s
		} else {
			readErr = err
		}
		if a.Clock.Since(began) >= a.PodReadyTimeout {
			if readErr != nil {
				return probeResult{unjudged: fmt.Errorf("read probe pod %s/%s: %w", p.Namespace, name, readErr)}
			}
			return probeResult{failed: fmt.Sprintf("after %s: new pod %s/%s is not Ready: %s", a.PodReadyTimeout, p.Namespace, name, state)}
		}
		t := a.Clock.NewTimer(probePollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return probeResult{unjudged: ctx.Err()}
		case <-t.C():
		}
	}
}

// probePod is the pod made from tmpl, named name and bound to node: the
// template's spec, with no service account token, never restarted, and
// marked with ProbePodLabel.
func probePod(tmpl *corev1.PodTemplate, name, node string) *corev1.Pod {
	no := false
	pod := &corev1.Pod{
		ObjectMeta: *tmpl.Template.ObjectMeta.DeepCopy(),
		Spec:       *tmpl.Template.Spec.DeepCopy(),
	}
	pod.Name, pod.GenerateName, pod.Namespace = name, "", tmpl.Namespace
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[ProbePodLabel] = "true"
	pod.Spec.NodeName = node
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.AutomountServiceAccountToken = &no
	return pod
}

// probePodState says whether pod is Ready, or has failed for good, and
// describes its state: the phase, and each container's waiting or
// terminated reason.
func probePodState(pod *corev1.Pod) (ready, failed bool, state string) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true, false, ""
		}
	}
	parts := []string{"phase " + string(pod.Status.Phase)}
	if pod.Status.Phase == "" {
		parts[0] = "not started"
	}
	if pod.Status.Reason != "" || pod.Status.Message != "" {
		parts = append(parts, strings.TrimSpace(pod.Status.Reason+" "+pod.Status.Message))
	}
	failed = pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
	for _, cs := range append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		switch {
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
			w := cs.State.Waiting
			parts = append(parts, fmt.Sprintf("container %s waiting: %s", cs.Name, strings.TrimSpace(w.Reason+" "+w.Message)))
			if stuckReasons[w.Reason] {
				failed = true
			}
		case cs.State.Terminated != nil:
			t := cs.State.Terminated
			parts = append(parts, strings.TrimSpace(fmt.Sprintf("container %s terminated: %s, exit code %d %s", cs.Name, t.Reason, t.ExitCode, lastLine(t.Message))))
		case cs.State.Running != nil:
			parts = append(parts, fmt.Sprintf("container %s running, not ready", cs.Name))
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" && c.Type == corev1.PodScheduled {
			parts = append(parts, c.Message)
		}
	}
	return false, failed, strings.TrimSpace(strings.Join(parts, "; "))
}

// lastLine is the last line of msg that is not blank: of a terminated
// container's message, which with terminationMessagePolicy
// FallbackToLogsOnError is the end of its log, the program's last words
// (the probe's "error: ..."), without a stack dump before them.
func lastLine(msg string) string {
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// stuckReasons are the waiting reasons of a container that will not start
// without a change of the pod or of the node: the probe's verdict need not
// wait for the timeout.
var stuckReasons = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

// deleteProbePod deletes the node's probe pod, if there is one, at once
// (grace period 0: the pod leaves the API and its kubelet ends it), so that
// the next run can create it again under its name.
func (a *Agent) deleteProbePod(ctx context.Context) {
	if a.ProbePod == nil {
		return
	}
	name := probePodName(a.NodeName)
	ctx, cancel := context.WithTimeout(ctx, getTimeout)
	defer cancel()
	zero := int64(0)
	err := a.Client.Pods(a.ProbePod.Namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		klog.FromContext(ctx).Info("Could not delete the probe pod", "pod", a.ProbePod.Namespace+"/"+name, "err", err)
	}
}

// probeBefore runs the probe pod before a restart: whether the new-pod
// check can judge the config, and, when it cannot, the Event that says so.
func (a *Agent) probeBefore(ctx context.Context) (bool, []event) {
	if a.ProbePod == nil {
		return false, nil
	}
	r := a.runProbePod(ctx)
	why := r.failed
	if r.unjudged != nil {
		why = r.unjudged.Error()
	}
	if why == "" {
		return true, nil
	}
	if ctx.Err() != nil {
		return false, nil
	}
	msg := "cannot judge new pods: the probe pod did not run and turn Ready before the restart (" + why + "); the health gate goes on without the new-pod check"
	klog.FromContext(ctx).Info("Gating without the new-pod check: the probe pod did not run and turn Ready before the restart", "reason", why)
	return false, []event{{reason: ReasonProbePodUnavailable, message: msg}}
}

// probeAfter is the new-pod check after a restart: an error when the probe
// pod did not run and turn Ready; nil when it did, or when the apiserver
// did not answer (logged).
func (a *Agent) probeAfter(ctx context.Context) error {
	r := a.runProbePod(ctx)
	if r.failed != "" {
		return fmt.Errorf("health gate: %s", r.failed)
	}
	if r.unjudged != nil && ctx.Err() == nil {
		klog.FromContext(ctx).Info("Health gate passed without its new-pod check", "err", r.unjudged)
	}
	return ctx.Err()
}
