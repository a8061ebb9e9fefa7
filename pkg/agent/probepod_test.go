package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

const probeNamespace, probeTemplate = "kube-system", "dkc-probe"

// Probe pod states as the fake kubelet reports them.
var (
	probeReady = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	// probeNotReady: running, its readiness probe never passes.
	probeNotReady = corev1.PodStatus{Phase: corev1.PodRunning,
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "probe", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
	// probeForkFailed: the probe could not start its processes, as under
	// a pids limit below what it needs.
	probeForkFailed = corev1.PodStatus{Phase: corev1.PodFailed,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "probe", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			Reason: "Error", ExitCode: 1, Message: "goroutine 1 [running]:\nmain.main()\n\nerror: start process 3 of 8: fork/exec /kubectl-dkc-probe: resource temporarily unavailable\n"}}}}}
	probeImagePull = corev1.PodStatus{Phase: corev1.PodPending,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "probe", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "ErrImagePull", Message: "failed to pull image"}}}}}
)

// withProbePod turns the new-pod check on, with the PodTemplate in the fake
// apiserver unless noTemplate, and a fake kubelet that reports the probe
// pod's status as status says for the number of kubelet restarts so far.
func (e *env) withProbePod(t *testing.T, noTemplate bool, status func(restarts int) corev1.PodStatus) {
	t.Helper()
	e.a.ProbePod = &ProbePod{Namespace: probeNamespace, Template: probeTemplate}
	if !noTemplate {
		tmpl := &corev1.PodTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: probeNamespace, Name: probeTemplate},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "dkc-probe"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "registry.example/kubectl-dkc-probe:v1"}}},
			},
		}
		_, err := e.client.CoreV1().PodTemplates(probeNamespace).Create(context.Background(), tmpl, metav1.CreateOptions{})
		must(t, err)
	}
	e.client.PrependReactor("get", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		get := action.(k8stesting.GetAction)
		if get.GetNamespace() != probeNamespace || get.GetName() != probePodName(nodeName) {
			return false, nil, nil
		}
		obj, err := e.client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), probeNamespace, get.GetName())
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*corev1.Pod).DeepCopy()
		pod.Status = status(len(e.restart.CallsSnapshot()))
		return true, pod, nil
	})
}

// probePodCalls lists the env's creates and deletes of the probe pod, in
// order, as "create" or "delete".
func (e *env) probePodCalls() []string {
	var out []string
	for _, a := range e.client.Actions() {
		if a.GetResource().Resource != "pods" || a.GetNamespace() != probeNamespace {
			continue
		}
		switch a := a.(type) {
		case k8stesting.CreateAction:
			out = append(out, "create")
		case k8stesting.DeleteAction:
			if a.GetName() == probePodName(nodeName) {
				out = append(out, "delete")
			}
		}
	}
	return out
}

// The health gate's new-pod check: a pod started after the restart must run
// and turn Ready, judged only when the same pod ran and turned Ready before.
func TestNewPodCheck(t *testing.T) {
	tests := map[string]struct {
		off        bool // no ProbePod
		noTemplate bool
		status     func(restarts int) corev1.PodStatus
		// leftover is a probe pod left by an agent that died.
		leftover      bool
		wantCondition string
		wantRestarts  []string
		wantCalls     []string
		wantError     string
		wantEvent     string
	}{
		"Ready before and after the restart: the gate passes": {
			status:        func(int) corev1.PodStatus { return probeReady },
			wantCondition: "True Trial",
			wantRestarts:  []string{"Restart"},
			wantCalls:     []string{"delete", "create", "delete", "delete", "create", "delete"},
		},
		"never Ready after the restart: rolled back": {
			status: func(restarts int) corev1.PodStatus {
				if restarts == 0 {
					return probeReady
				}
				return probeNotReady
			},
			wantCondition: "False RolledBack",
			wantRestarts:  []string{"Restart", "Restart"},
			wantCalls:     []string{"delete", "create", "delete", "delete", "create", "delete"},
			wantError:     "health gate: after 10s: new pod kube-system/dkc-probe-n1 is not Ready: phase Running; container probe running, not ready",
		},
		"cannot start its processes after the restart: rolled back at once": {
			status: func(restarts int) corev1.PodStatus {
				if restarts == 0 {
					return probeReady
				}
				return probeForkFailed
			},
			wantCondition: "False RolledBack",
			wantRestarts:  []string{"Restart", "Restart"},
			wantCalls:     []string{"delete", "create", "delete", "delete", "create", "delete"},
			wantError:     "health gate: new pod kube-system/dkc-probe-n1 did not run: phase Failed; container probe terminated: Error, exit code 1 error: start process 3 of 8: fork/exec /kubectl-dkc-probe: resource temporarily unavailable",
		},
		"cannot start before the restart: not judged, the gate passes": {
			status:        func(int) corev1.PodStatus { return probeImagePull },
			wantCondition: "True Trial",
			wantRestarts:  []string{"Restart"},
			wantCalls:     []string{"delete", "create", "delete"},
			wantEvent:     "Warning ProbePodUnavailable",
		},
		"no PodTemplate: not judged, the gate passes": {
			noTemplate:    true,
			status:        func(int) corev1.PodStatus { return probeReady },
			wantCondition: "True Trial",
			wantRestarts:  []string{"Restart"},
			wantEvent:     "Warning ProbePodUnavailable",
		},
		"a probe pod left by an agent that died is deleted first": {
			leftover:      true,
			status:        func(int) corev1.PodStatus { return probeReady },
			wantCondition: "True Trial",
			wantRestarts:  []string{"Restart"},
			wantCalls:     []string{"create", "delete", "create", "delete", "delete", "create", "delete"},
		},
		"no probe pod configured: the check is off": {
			off:           true,
			wantCondition: "True Trial",
			wantRestarts:  []string{"Restart"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.a.PodReadyTimeout = 10 * time.Second
			if !tc.off {
				e.withProbePod(t, tc.noTemplate, tc.status)
			}
			if tc.leftover {
				_, err := e.client.CoreV1().Pods(probeNamespace).Create(context.Background(), &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Namespace: probeNamespace, Name: probePodName(nodeName)}}, metav1.CreateOptions{})
				must(t, err)
			}
			e.configMap(t, "a", cfgA, nil)
			e.assign(t, "a")

			e.syncStepping(t)

			diff(t, "condition", tc.wantCondition, e.condition(t))
			diff(t, "restarter calls", tc.wantRestarts, e.restart.CallsSnapshot())
			diff(t, "probe pod creates and deletes", tc.wantCalls, e.probePodCalls())
			if _, err := e.client.CoreV1().Pods(probeNamespace).Get(context.Background(), probePodName(nodeName), metav1.GetOptions{}); err == nil {
				t.Error("the probe pod is left after the gate")
			}
			st := e.status(t)
			if tc.wantError == "" && st.Error != "" {
				t.Errorf("status error %q, want none", st.Error)
			}
			if !strings.HasSuffix(st.Error, tc.wantError) {
				t.Errorf("status error %q does not end with %q", st.Error, tc.wantError)
			}
			if strings.Contains(st.Error, "\n") {
				t.Errorf("status error %q holds more than the probe's last line", st.Error)
			}
			if tc.wantError != "" {
				diff(t, "kubelet config after the rollback", local, string(e.writer.Current))
			}
			events := e.events()
			found := false
			for _, ev := range events {
				if ev == "Warning "+ReasonProbePodUnavailable {
					found = true
				}
			}
			if found != (tc.wantEvent != "") {
				t.Errorf("events %v: %s recorded %v, want %v", events, ReasonProbePodUnavailable, found, tc.wantEvent != "")
			}
		})
	}
}

// The probe pod is the template's, bound to the node, never restarted,
// without a service account token, and marked for the admission policy.
func TestProbePod(t *testing.T) {
	yes := true
	tmpl := &corev1.PodTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: "dkc", Name: "probe"},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "dkc-probe"}},
			Spec: corev1.PodSpec{
				AutomountServiceAccountToken: &yes,
				RestartPolicy:                corev1.RestartPolicyAlways,
				Containers:                   []corev1.Container{{Name: "probe", Image: "r/kubectl-dkc-probe:v1"}},
			},
		},
	}
	pod := probePod(tmpl, "dkc-probe-n1", "n1")
	no := false
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "dkc", Name: "dkc-probe-n1",
			Labels: map[string]string{"app.kubernetes.io/name": "dkc-probe", ProbePodLabel: "true"}},
		Spec: corev1.PodSpec{
			NodeName:                     "n1",
			AutomountServiceAccountToken: &no,
			RestartPolicy:                corev1.RestartPolicyNever,
			Containers:                   []corev1.Container{{Name: "probe", Image: "r/kubectl-dkc-probe:v1"}},
		},
	}
	diff(t, "probe pod", want, pod)
	if *tmpl.Template.Spec.AutomountServiceAccountToken != true {
		t.Error("probePod changed the template")
	}
}

func TestProbePodName(t *testing.T) {
	diff(t, "short node", "dkc-probe-n1", probePodName("n1"))
	long := probePodName(strings.Repeat("a", 253))
	if len(long) != 253 || !strings.HasPrefix(long, "dkc-probe-aaa") {
		t.Errorf("probePodName of a 253-character node: %q (%d characters), want 253 starting dkc-probe-", long, len(long))
	}
	if probePodName(strings.Repeat("a", 252)+"b") == long {
		t.Error("two long node names give one probe pod name")
	}
}
