package source

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Carrier names where a Node holds its assignment and status.
type Carrier string

const (
	// Native is the original spec.configSource and status.config fields,
	// which apiservers before 1.26 keep (1.23 to 1.25 only with the
	// DynamicKubeletConfig feature gate).
	Native Carrier = "native"
	// Annotation is AssignedAnnotation and StatusAnnotation, which every
	// apiserver keeps.
	Annotation Carrier = "annotation"
	// Auto is a flag value only: detect the carrier with Detect. It is never
	// stored on a Node.
	Auto Carrier = "auto"
)

// Carriers lists the values ParseCarrier accepts, in the order help text
// shows them.
var Carriers = []Carrier{Auto, Native, Annotation}

// ParseCarrier parses the value of the --carrier flag.
func ParseCarrier(s string) (Carrier, error) {
	for _, c := range Carriers {
		if s == string(c) {
			return c, nil
		}
	}
	names := make([]string, len(Carriers))
	for i, c := range Carriers {
		names[i] = string(c)
	}
	return "", fmt.Errorf("invalid --carrier %q: must be one of %s", s, strings.Join(names, ", "))
}

// Assigned returns the config assigned to node and the carrier that holds
// it. The native spec.configSource wins when set; else AssignedAnnotation is
// read. It returns (nil, "", nil) when the node has no assignment, which means
// its local config. The source is returned as stored, without validation:
// see ValidateSource.
func Assigned(node *corev1.Node) (*corev1.NodeConfigSource, Carrier, error) {
	if node.Spec.ConfigSource != nil {
		return node.Spec.ConfigSource.DeepCopy(), Native, nil
	}
	src := &corev1.NodeConfigSource{}
	ok, err := fromAnnotation(node, AssignedAnnotation, src)
	if err != nil || !ok {
		return nil, "", err
	}
	return src, Annotation, nil
}

// Status returns the config status of node and the carrier that holds it.
// The native status.config wins when set; else StatusAnnotation is read. It
// returns (nil, "", nil) when the node reports no status.
func Status(node *corev1.Node) (*corev1.NodeConfigStatus, Carrier, error) {
	if node.Status.Config != nil {
		return node.Status.Config.DeepCopy(), Native, nil
	}
	st := &corev1.NodeConfigStatus{}
	ok, err := fromAnnotation(node, StatusAnnotation, st)
	if err != nil || !ok {
		return nil, "", err
	}
	return st, Annotation, nil
}

// fromAnnotation decodes the JSON in annotation key of node into v. It
// reports false when the annotation is absent, empty or JSON null. Unknown
// fields are ignored, so that an older reader accepts a newer writer's value.
func fromAnnotation(node *corev1.Node, key string, v any) (bool, error) {
	value, ok := node.Annotations[key]
	if !ok || strings.TrimSpace(value) == "" || strings.TrimSpace(value) == "null" {
		return false, nil
	}
	if err := json.Unmarshal([]byte(value), v); err != nil {
		return false, fmt.Errorf("node %q: annotation %s: invalid JSON: %w", node.Name, key, err)
	}
	return true, nil
}
