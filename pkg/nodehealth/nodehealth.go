// Package nodehealth judges whether a node is still fine after its kubelet
// restarted on a new config: not only the kubelet (package kubelet's
// Prober asks it), but what runs on the node.
//
// Before a restart the agent takes a Baseline: the pressure conditions that
// were False, and the pods that were running, each with its readiness.
// After the restart, and then for the whole trial until the config becomes
// last-known-good, Judge holds the node to it:
//
//   - the Node stays Ready (in the trial: is not other than Ready for
//     NotReadyGrace or longer), and (in the trial) its Lease keeps being
//     renewed within the node monitor grace period;
//   - no pressure condition that was False turns True;
//   - no pod that was running is stopped by the kubelet: evicted, or
//     rejected when the restarted kubelet admits the node's pods again;
//   - at the gate only: every pod that was Ready before the restart is Ready
//     again. Kubelets up to 1.34 reset every probed container's readiness at
//     a restart (kubernetes/kubernetes#100277); from 1.35 readiness is kept
//     unless the node's Ready condition flipped (KEP-4781). A kubelet up to
//     1.34 first reports the pod as it was, and resets its readiness only
//     when the probe's worker starts, at a random moment within one probe
//     period: so on those kubelets the gate also waits until each probed
//     pod's readiness was decided again after the restart (its Ready
//     condition changed since), or one period and timeout have passed.
//
// A pod deleted since the baseline (scaled down, rescheduled by its owner)
// is not the config's doing and is not judged. Judge is a pure function of
// what it is given; the agent gathers it.
package nodehealth

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
)

// Baseline is what a node ran before its kubelet restarted on a new config.
// The agent records it with the assignment, so that an agent restarted
// during the trial holds the node to the same baseline.
type Baseline struct {
	// Taken is when the baseline was taken, just before the restart.
	Taken time.Time `json:"taken"`
	// Clear lists the pressure conditions that were False.
	Clear []corev1.NodeConditionType `json:"clear,omitempty"`
	// Pods lists the pods that were running on the node.
	Pods []Pod `json:"pods,omitempty"`
}

// Pod is a pod of a Baseline.
type Pod struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
	// Ready is whether its Ready condition was True.
	Ready bool `json:"ready,omitempty"`
	// ProbeWait is the longest readiness probe period plus timeout of its
	// containers: by then a restarted kubelet has probed each of them
	// once. Zero when no container has a readiness probe.
	ProbeWait time.Duration `json:"probeWait,omitempty"`
}

func (p Pod) String() string { return p.Namespace + "/" + p.Name }

// DeepCopy returns a copy of b that shares nothing with it.
func (b *Baseline) DeepCopy() *Baseline {
	if b == nil {
		return nil
	}
	c := *b
	c.Clear = slices.Clone(b.Clear)
	c.Pods = slices.Clone(b.Pods)
	return &c
}

// ReadyPods counts the baseline's pods that were Ready.
func (b *Baseline) ReadyPods() int {
	n := 0
	for _, p := range b.Pods {
		if p.Ready {
			n++
		}
	}
	return n
}

// Take is the baseline of node and pods, the pods bound to it, at now.
func Take(node *corev1.Node, pods []*corev1.Pod, now time.Time) Baseline {
	b := Baseline{Taken: now}
	for _, c := range node.Status.Conditions {
		if isPressure(c.Type) && c.Status == corev1.ConditionFalse {
			b.Clear = append(b.Clear, c.Type)
		}
	}
	slices.Sort(b.Clear)
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		b.Pods = append(b.Pods, Pod{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Ready: PodReady(p), ProbeWait: probeWait(p)})
	}
	slices.SortFunc(b.Pods, func(x, y Pod) int { return strings.Compare(x.String(), y.String()) })
	return b
}

// Running counts the pods that hold a place on the node: bound to it and
// neither Succeeded nor Failed.
func Running(pods []*corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			n++
		}
	}
	return n
}

// isPressure reports whether t is one of the kubelet's pressure conditions
// (MemoryPressure, DiskPressure, PIDPressure).
func isPressure(t corev1.NodeConditionType) bool {
	return strings.HasSuffix(string(t), "Pressure")
}

// PodReady reports whether p's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	c := readyCondition(p)
	return c != nil && c.Status == corev1.ConditionTrue
}

func readyCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// probeWait is the longest periodSeconds plus timeoutSeconds of p's
// readiness probes (the apiserver defaults them to 10 and 1).
func probeWait(p *corev1.Pod) time.Duration {
	var longest time.Duration
	for _, c := range p.Spec.Containers {
		r := c.ReadinessProbe
		if r == nil {
			continue
		}
		period, timeout := r.PeriodSeconds, r.TimeoutSeconds
		if period <= 0 {
			period = 10
		}
		if timeout <= 0 {
			timeout = 1
		}
		longest = max(longest, time.Duration(period+timeout)*time.Second)
	}
	return longest
}

// ResetsReadiness reports whether node's kubelet resets the readiness of
// probed containers when it restarts: versions before 1.35, and a version
// it cannot read.
func ResetsReadiness(node *corev1.Node) bool {
	v, err := version.ParseGeneric(node.Status.NodeInfo.KubeletVersion)
	return err != nil || v.LessThan(version.MajorMinor(1, 35))
}

// Stage is the part of an apply a judgement is for.
type Stage int

const (
	// Gate is the health gate right after the restart: it waits for the
	// pods that were Ready to be Ready again.
	Gate Stage = iota
	// Trial is the rest of the trial, until promotion: the node must stay
	// fine, and pod readiness is the pods' own business again.
	Trial
)

// Observed is the node as the agent sees it now.
type Observed struct {
	Node *corev1.Node
	// Pods are the pods bound to the node now.
	Pods []*corev1.Pod
	// Stopped holds, by UID, the pods the agent saw turn Failed since the
	// baseline, with the kubelet's reason and message: a pod that its
	// owner deleted right after (the DaemonSet controller deletes failed
	// daemon pods) is still known.
	Stopped map[types.UID]string
	// LeaseRenewed is the renewTime of the node's Lease; zero when it was
	// not read (the gate: the kubelet's Prober checked it).
	LeaseRenewed time.Time
	// Restarted is when the kubelet's restart began; zero when unknown.
	// At the gate, on a kubelet that resets readiness (ResetsReadiness), a
	// probed pod must have had its readiness decided since.
	Restarted time.Time
	// Up is when the restarted kubelet passed its own checks; zero when
	// unknown. Its probes start once it is up, so a probed pod's period
	// and timeout are waited from Up when it is later than Restarted: a
	// kubelet slow to come up resets readiness late.
	Up time.Time
	// Grace is the node monitor grace period: a Lease not renewed for that
	// long makes the node Unknown.
	Grace time.Duration
	Now   time.Time
}

// Verdict is Judge's answer. At most one of Failed and Waiting is set;
// neither means the node is fine.
type Verdict struct {
	// Failed says why the config failed: the agent rolls back.
	Failed string
	// Waiting says what the gate still waits for.
	Waiting string
}

// OK reports whether the node is fine.
func (v Verdict) OK() bool { return v.Failed == "" && v.Waiting == "" }

// Judge holds o to b at stage s.
func Judge(b Baseline, o Observed, s Stage) Verdict {
	now := make(map[types.UID]*corev1.Pod, len(o.Pods))
	for _, p := range o.Pods {
		now[p.UID] = p
	}
	var failed, waiting []string
	for _, bp := range b.Pods {
		p := now[bp.UID]
		if why, ok := o.Stopped[bp.UID]; ok {
			failed = append(failed, fmt.Sprintf("pod %s was stopped by the kubelet: %s", bp, why))
			continue
		}
		if p == nil {
			continue // deleted: its owner's doing
		}
		if p.Status.Phase == corev1.PodFailed {
			failed = append(failed, fmt.Sprintf("pod %s was stopped by the kubelet: %s", bp, StopReason(p)))
			continue
		}
		if s != Gate || !bp.Ready || p.DeletionTimestamp != nil {
			continue
		}
		if !PodReady(p) {
			waiting = append(waiting, fmt.Sprintf("pod %s was Ready before the restart and is not Ready", bp))
			continue
		}
		if bp.ProbeWait > 0 && !o.Restarted.IsZero() && o.Node != nil && ResetsReadiness(o.Node) &&
			readyCondition(p).LastTransitionTime.Time.Before(o.Restarted.Truncate(time.Second)) &&
			o.Now.Before(later(o.Restarted, o.Up).Add(bp.ProbeWait)) {
			waiting = append(waiting, fmt.Sprintf("pod %s: the restarted kubelet%s has not probed its readiness yet (up to %s after it is up)",
				bp, prefixed(o.Node.Status.NodeInfo.KubeletVersion), bp.ProbeWait))
		}
	}
	if o.Node != nil {
		for _, t := range b.Clear {
			if c := condition(o.Node, t); c != nil && c.Status == corev1.ConditionTrue {
				failed = append(failed, fmt.Sprintf("node condition %s turned True: %s", t, reasonMessage(c.Reason, c.Message)))
			}
		}
		switch ready := condition(o.Node, corev1.NodeReady); {
		case ready != nil && ready.Status == corev1.ConditionTrue:
		case s == Trial && ready == nil:
			failed = append(failed, "node has no Ready condition")
		case s == Trial && o.Now.Sub(ready.LastTransitionTime.Time) < NotReadyGrace:
			// A restarted kubelet may report NotReady (PLEG not yet
			// healthy) until its next status update: not a failure yet.
		case s == Trial:
			failed = append(failed, fmt.Sprintf("node Ready is %s since %s: %s", ready.Status,
				ready.LastTransitionTime.UTC().Format(time.RFC3339), reasonMessage(ready.Reason, ready.Message)))
		case ready == nil:
			waiting = append(waiting, "node has no Ready condition")
		default:
			waiting = append(waiting, fmt.Sprintf("node Ready is %s", ready.Status))
		}
	}
	if s == Trial && !o.LeaseRenewed.IsZero() && o.Grace > 0 {
		if age := o.Now.Sub(o.LeaseRenewed); age >= o.Grace {
			failed = append(failed, fmt.Sprintf("node lease last renewed %s ago, at or beyond the node monitor grace period %s", age.Round(time.Second), o.Grace))
		}
	}
	switch {
	case len(failed) > 0:
		return Verdict{Failed: summarize(failed)}
	case len(waiting) > 0:
		return Verdict{Waiting: summarize(waiting)}
	}
	return Verdict{}
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// prefixed is s after a space, or "" for "".
func prefixed(s string) string {
	if s == "" {
		return ""
	}
	return " " + s
}

// StopReason is the kubelet's reason and message for a Failed pod, such as
// "Evicted: The node was low on resource: memory." or "OutOfpods: Node
// didn't have enough resource: pods".
func StopReason(p *corev1.Pod) string {
	if p.Status.Reason == "" && p.Status.Message == "" {
		return "phase Failed"
	}
	return reasonMessage(p.Status.Reason, p.Status.Message)
}

func reasonMessage(reason, message string) string {
	switch {
	case reason == "":
		return message
	case message == "":
		return reason
	}
	return reason + ": " + message
}

func condition(node *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == t {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// NotReadyGrace is how long the Node's Ready may be other than True during
// a trial before the trial fails: a kubelet that has just started reports
// NotReady ("PLEG is not healthy: pleg has yet to be successful") until its
// next status update, 10 s later by default.
const NotReadyGrace = 30 * time.Second

// maxNamed is how many findings a verdict names.
const maxNamed = 3

// summarize joins the first maxNamed findings and counts the rest.
func summarize(s []string) string {
	if len(s) <= maxNamed {
		return strings.Join(s, "; ")
	}
	return strings.Join(s[:maxNamed], "; ") + fmt.Sprintf("; and %d more", len(s)-maxNamed)
}
