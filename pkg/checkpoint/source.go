package checkpoint

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/pkg/atomicfile"

	"github.com/kubectl-dkc/dkc/pkg/apis/dkc/v1alpha1"
)

var (
	// ErrInvalidKey means a name that must become a file name (a ConfigMap
	// key, a uid, a resourceVersion or a baseline name) is not a base name:
	// it is empty, "." or "..", contains "/", or is longer than 255 bytes.
	ErrInvalidKey = errors.New("invalid key")
	// ErrInvalidSource means a NodeConfigSource cannot name a checkpoint: it
	// has no ConfigMap reference, or the reference lacks a field.
	ErrInvalidSource = errors.New("invalid config source")
	// ErrNotFound means a checkpoint, or a key in it, is not in the store.
	ErrNotFound = errors.New("not found")
	// ErrCorrupt means a meta file holds something the store cannot decode.
	ErrCorrupt = errors.New("corrupt")
)

// serializedKind is the kind of the objects in meta/assigned and
// meta/last-known-good.
const serializedKind = "SerializedNodeConfigSource"

// tmpPrefix starts the name of every temporary file and directory.
const tmpPrefix = atomicfile.TempPrefix

// maxNameLen is the longest file name Linux file systems accept.
const maxNameLen = 255

// validateName checks that name can be used as one path component.
func validateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: must not be empty", ErrInvalidKey)
	case name == "." || name == "..":
		return fmt.Errorf("%w %q: must not be %q", ErrInvalidKey, name, name)
	case strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("%w %q: must be a base name, without \"/\"", ErrInvalidKey, name)
	case len(name) > maxNameLen:
		return fmt.Errorf("%w %q: longer than %d bytes", ErrInvalidKey, name, maxNameLen)
	}
	return nil
}

// validateDirName checks a name the store uses as a directory or a file it
// scans for temporaries, so it must not look like a temporary.
func validateDirName(name string) error {
	if err := validateName(name); err != nil {
		return err
	}
	if strings.HasPrefix(name, tmpPrefix) {
		return fmt.Errorf("%w %q: must not start with %q", ErrInvalidKey, name, tmpPrefix)
	}
	return nil
}

// checkpointRef returns the ConfigMap reference of src after checking that
// it names a checkpoint.
func checkpointRef(src *corev1.NodeConfigSource) (*corev1.ConfigMapNodeConfigSource, error) {
	if src == nil {
		return nil, fmt.Errorf("%w: nil", ErrInvalidSource)
	}
	ref := src.ConfigMap
	if ref == nil {
		// Upstream's status string, kept verbatim for operators' runbooks.
		return nil, fmt.Errorf("%w: %s", ErrInvalidSource, v1alpha1.AllNilSubfieldsError)
	}
	if ref.UID == "" {
		return nil, fmt.Errorf("%w: configMap %s/%s: uid is required", ErrInvalidSource, ref.Namespace, ref.Name)
	}
	if ref.ResourceVersion == "" {
		return nil, fmt.Errorf("%w: configMap %s/%s: resourceVersion is required", ErrInvalidSource, ref.Namespace, ref.Name)
	}
	if err := validateDirName(string(ref.UID)); err != nil {
		return nil, fmt.Errorf("%w: configMap %s/%s: uid: %w", ErrInvalidSource, ref.Namespace, ref.Name, err)
	}
	if err := validateDirName(ref.ResourceVersion); err != nil {
		return nil, fmt.Errorf("%w: configMap %s/%s: resourceVersion: %w", ErrInvalidSource, ref.Namespace, ref.Name, err)
	}
	return ref, nil
}

// validateAssignable checks that src can be recorded in a meta file: nil
// (the local config) or a full ConfigMap reference.
func validateAssignable(src *corev1.NodeConfigSource) error {
	if src == nil {
		return nil
	}
	ref, err := checkpointRef(src)
	if err != nil {
		return err
	}
	if ref.Namespace == "" || ref.Name == "" {
		return fmt.Errorf("%w: configMap %s/%s: namespace and name are required", ErrInvalidSource, ref.Namespace, ref.Name)
	}
	if err := validateName(ref.KubeletConfigKey); err != nil {
		return fmt.Errorf("%w: configMap %s/%s: kubeletConfigKey: %w", ErrInvalidSource, ref.Namespace, ref.Name, err)
	}
	return nil
}

// encodeSource returns the content of a meta file for src: empty for the
// local config, else the YAML of a SerializedNodeConfigSource.
func encodeSource(src *corev1.NodeConfigSource) ([]byte, error) {
	if src == nil {
		return []byte{}, nil
	}
	return yaml.Marshal(&kubeletv1beta1.SerializedNodeConfigSource{
		TypeMeta: metav1.TypeMeta{
			Kind:       serializedKind,
			APIVersion: kubeletv1beta1.SchemeGroupVersion.String(),
		},
		Source: *src,
	})
}

// decodeSource is the inverse of encodeSource.
func decodeSource(data []byte) (*corev1.NodeConfigSource, error) {
	if len(data) == 0 {
		return nil, nil
	}
	var obj kubeletv1beta1.SerializedNodeConfigSource
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return nil, err
	}
	if want := kubeletv1beta1.SchemeGroupVersion.String(); obj.Kind != serializedKind || obj.APIVersion != want {
		return nil, fmt.Errorf("got kind %q apiVersion %q, want kind %q apiVersion %q", obj.Kind, obj.APIVersion, serializedKind, want)
	}
	if err := validateAssignable(&obj.Source); err != nil {
		return nil, err
	}
	return &obj.Source, nil
}
