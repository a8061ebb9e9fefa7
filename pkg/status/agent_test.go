package status

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

func TestAgent(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	const (
		assignB   = `{"configMap":{"namespace":"kube-system","name":"b","kubeletConfigKey":"kubelet"}}`
		statusA   = `{"assigned":{"configMap":{"namespace":"kube-system","name":"a","uid":"u","resourceVersion":"1","kubeletConfigKey":"kubelet"}}}`
		statusB   = `{"assigned":{"configMap":{"namespace":"kube-system","name":"b","uid":"u","resourceVersion":"2","kubeletConfigKey":"kubelet"}}}`
		ownsAnnot = `{"f:metadata":{"f:annotations":{"f:kubectl-dkc.io/config-source":{}}}}`
		ownsSpec  = `{"f:spec":{"f:configSource":{".":{},"f:configMap":{}}}}`
		ownsOther = `{"f:metadata":{"f:labels":{"f:a":{}}}}`
	)
	entry := func(fields string, age time.Duration, subresource string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{
			Manager: source.FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: subresource,
			Time: &metav1.Time{Time: now.Add(-age)}, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)},
		}
	}
	condition := corev1.NodeCondition{Type: source.ConditionType, Status: corev1.ConditionTrue, Reason: "Reset"}
	tests := map[string]struct {
		annotations map[string]string
		spec        *corev1.NodeConfigSource
		conditions  []corev1.NodeCondition
		managed     []metav1.ManagedFieldsEntry
		want        AgentState
	}{
		"nothing at all":               {want: AgentNone},
		"assigned, nothing reported":   {annotations: map[string]string{source.AssignedAnnotation: assignB}, managed: []metav1.ManagedFieldsEntry{entry(ownsAnnot, time.Hour, "")}, want: AgentNone},
		"condition only (after reset)": {conditions: []corev1.NodeCondition{condition}, want: AgentReady},
		"status answers the assignment": {
			annotations: map[string]string{source.AssignedAnnotation: assignB, source.StatusAnnotation: statusB},
			managed:     []metav1.ManagedFieldsEntry{entry(ownsAnnot, time.Hour, "")},
			want:        AgentReady,
		},
		"assignment pending, young": {
			annotations: map[string]string{source.AssignedAnnotation: assignB, source.StatusAnnotation: statusA},
			managed:     []metav1.ManagedFieldsEntry{entry(ownsAnnot, StaleAfter, "")},
			want:        AgentReady,
		},
		"assignment pending, old": {
			annotations: map[string]string{source.AssignedAnnotation: assignB, source.StatusAnnotation: statusA},
			managed:     []metav1.ManagedFieldsEntry{entry(ownsAnnot, StaleAfter+time.Second, "")},
			want:        AgentStale,
		},
		"pending, the newest owner counts": {
			annotations: map[string]string{source.AssignedAnnotation: assignB, source.StatusAnnotation: statusA},
			managed:     []metav1.ManagedFieldsEntry{entry(ownsAnnot, time.Hour, ""), entry(ownsAnnot, time.Second, "")},
			want:        AgentReady,
		},
		"pending, the agent's status writes do not count": {
			annotations: map[string]string{source.AssignedAnnotation: assignB, source.StatusAnnotation: statusA},
			managed:     []metav1.ManagedFieldsEntry{entry(ownsAnnot, time.Hour, ""), entry(ownsAnnot, time.Second, "status")},
			want:        AgentStale,
		},
		"pending, other fields' writes do not count": {
			annotations: map[string]string{source.AssignedAnnotation: assignB, source.StatusAnnotation: statusA},
			managed:     []metav1.ManagedFieldsEntry{entry(ownsAnnot, time.Hour, ""), entry(ownsOther, time.Second, "")},
			want:        AgentStale,
		},
		"pending, age unknown": {
			annotations: map[string]string{source.AssignedAnnotation: assignB, source.StatusAnnotation: statusA},
			want:        AgentReady,
		},
		"native, pending, old": {
			spec:       cm("b"),
			conditions: []corev1.NodeCondition{condition},
			managed:    []metav1.ManagedFieldsEntry{entry(ownsSpec, time.Hour, "")},
			want:       AgentStale,
		},
		"status answers the assignment, gate running": {
			annotations: map[string]string{source.AssignedAnnotation: assignB, source.StatusAnnotation: statusB},
			conditions:  []corev1.NodeCondition{{Type: source.ConditionType, Status: corev1.ConditionUnknown, Reason: source.ReasonVerifying}},
			want:        AgentVerifying,
		},
		"gate running for an older assignment": {
			annotations: map[string]string{source.AssignedAnnotation: assignB, source.StatusAnnotation: statusA},
			conditions:  []corev1.NodeCondition{{Type: source.ConditionType, Status: corev1.ConditionUnknown, Reason: source.ReasonVerifying}},
			want:        AgentReady,
		},
		"reset pending, age unknown": {
			annotations: map[string]string{source.StatusAnnotation: statusA},
			want:        AgentReady,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			node := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: tc.annotations, ManagedFields: tc.managed},
				Spec:       corev1.NodeSpec{ConfigSource: tc.spec},
				Status:     corev1.NodeStatus{Conditions: tc.conditions},
			}
			if diff := cmp.Diff(tc.want, Agent(node, now)); diff != "" {
				t.Errorf("Agent() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAgentCause(t *testing.T) {
	tests := map[AgentState]string{
		AgentNone:      "no dkc agent has reported on it; see docs/install.md",
		AgentStale:     "its dkc agent has not taken up the assignment for over 2m0s; check the agent",
		AgentReady:     "",
		AgentVerifying: "its dkc agent's health gate is waiting for Ready from the restarted kubelet",
		"":             "",
	}
	for state, want := range tests {
		if diff := cmp.Diff(want, AgentCause(state)); diff != "" {
			t.Errorf("AgentCause(%q) (-want +got):\n%s", state, diff)
		}
	}
}
