package source

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// AllNilSubfieldsError is upstream's status string for a NodeConfigSource
// without a subfield, kept verbatim. status.AllNilSubfieldsError is the same
// constant, with the other upstream status strings.
const AllNilSubfieldsError = "invalid NodeConfigSource, exactly one subfield must be non-nil, but all were nil"

// ErrInvalidSource means a NodeConfigSource cannot be an assignment.
var ErrInvalidSource = errors.New("invalid config source")

// ErrAllNilSubfields means a NodeConfigSource has no subfield set. Its message
// is exactly AllNilSubfieldsError, and it matches ErrInvalidSource too.
var ErrAllNilSubfields error = allNilError{}

type allNilError struct{}

func (allNilError) Error() string        { return AllNilSubfieldsError }
func (allNilError) Is(target error) bool { return target == ErrInvalidSource }

// ValidateSource checks that src can be an assignment. A nil src is valid: it
// means the node's local config. Otherwise exactly one subfield must be set
// (else ErrAllNilSubfields); for configMap, namespace, name and
// kubeletConfigKey are required and kubeletConfigKey must be a valid ConfigMap
// key, while uid and resourceVersion are forbidden: only a status carries
// them. Other errors match ErrInvalidSource.
func ValidateSource(src *corev1.NodeConfigSource) error {
	if src == nil {
		return nil
	}
	ref := src.ConfigMap
	if ref == nil {
		return ErrAllNilSubfields
	}
	var problems []string
	if ref.Namespace == "" {
		problems = append(problems, "namespace is required")
	} else if msgs := validation.IsDNS1123Label(ref.Namespace); len(msgs) > 0 {
		problems = append(problems, fmt.Sprintf("namespace %q: %s", ref.Namespace, strings.Join(msgs, ", ")))
	}
	if ref.Name == "" {
		problems = append(problems, "name is required")
	} else if msgs := validation.IsDNS1123Subdomain(ref.Name); len(msgs) > 0 {
		problems = append(problems, fmt.Sprintf("name %q: %s", ref.Name, strings.Join(msgs, ", ")))
	}
	if ref.KubeletConfigKey == "" {
		problems = append(problems, "kubeletConfigKey is required")
	} else if msgs := validation.IsConfigMapKey(ref.KubeletConfigKey); len(msgs) > 0 {
		problems = append(problems, fmt.Sprintf("kubeletConfigKey %q: %s", ref.KubeletConfigKey, strings.Join(msgs, ", ")))
	}
	if ref.UID != "" {
		problems = append(problems, "uid is forbidden in an assignment")
	}
	if ref.ResourceVersion != "" {
		problems = append(problems, "resourceVersion is forbidden in an assignment")
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: configMap %s/%s: %s", ErrInvalidSource, ref.Namespace, ref.Name, strings.Join(problems, "; "))
	}
	return nil
}

// Equal reports whether a and b name the same config: both nil (the local
// config), or the same ConfigMap namespace, name and kubeletConfigKey. uid and
// resourceVersion are compared only when both sides have them, so an
// assignment (which has none) equals the status source it became.
func Equal(a, b *corev1.NodeConfigSource) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	x, y := a.ConfigMap, b.ConfigMap
	if x == nil || y == nil {
		return x == nil && y == nil
	}
	if x.Namespace != y.Namespace || x.Name != y.Name || x.KubeletConfigKey != y.KubeletConfigKey {
		return false
	}
	if x.UID != "" && y.UID != "" && x.UID != y.UID {
		return false
	}
	if x.ResourceVersion != "" && y.ResourceVersion != "" && x.ResourceVersion != y.ResourceVersion {
		return false
	}
	return true
}
