package kubeclient

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
)

// EventSink is the record.EventSink of an event broadcaster: it writes each
// Event in the Event's own namespace, as client-go's EventSinkImpl does.
type EventSink struct {
	Client Interface
}

var _ record.EventSink = EventSink{}

// Create creates event.
func (s EventSink) Create(event *corev1.Event) (*corev1.Event, error) {
	return s.Client.Events(event.Namespace).Create(context.Background(), event, metav1.CreateOptions{})
}

// Update replaces event.
func (s EventSink) Update(event *corev1.Event) (*corev1.Event, error) {
	return s.Client.Events(event.Namespace).Update(context.Background(), event, metav1.UpdateOptions{})
}

// Patch applies data, a strategic merge patch, to event.
func (s EventSink) Patch(event *corev1.Event, data []byte) (*corev1.Event, error) {
	return s.Client.Events(event.Namespace).Patch(context.Background(), event.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
}
