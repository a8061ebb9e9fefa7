package source

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
)

// ErrKeyNotFound means a ConfigMap has no key of the name an assignment
// (or a flag) gives. The error Payload returns matches it.
var ErrKeyNotFound = errors.New("key not found in configmap")

// KeyNotFoundError says which key a ConfigMap lacks and which keys it has.
type KeyNotFoundError struct {
	Namespace, Name, Key string
	// Keys lists the ConfigMap's data and binaryData keys, sorted.
	Keys []string
}

func (e *KeyNotFoundError) Error() string {
	ref := e.Namespace + "/" + e.Name
	if len(e.Keys) == 0 {
		return fmt.Sprintf("configmap %q has no key %q: it has no keys at all", ref, e.Key)
	}
	return fmt.Sprintf("configmap %q has no key %q: it has %s", ref, e.Key, strings.Join(e.Keys, ", "))
}

// Is makes a KeyNotFoundError match ErrKeyNotFound.
func (e *KeyNotFoundError) Is(target error) bool { return target == ErrKeyNotFound }

// Payload is the one rule for reading a kubelet config out of a ConfigMap,
// used by assign, diff and the agent: the bytes under key in data, else
// under key in binaryData (the apiserver refuses a key present in both).
// A missing key is a *KeyNotFoundError that lists the keys cm has. The bytes
// are returned as stored; decoding them is kubeletconfig's job.
func Payload(cm *corev1.ConfigMap, key string) ([]byte, error) {
	if v, ok := cm.Data[key]; ok {
		return []byte(v), nil
	}
	if v, ok := cm.BinaryData[key]; ok {
		return v, nil
	}
	keys := slices.Collect(maps.Keys(cm.Data))
	keys = slices.AppendSeq(keys, maps.Keys(cm.BinaryData))
	slices.Sort(keys)
	return nil, &KeyNotFoundError{Namespace: cm.Namespace, Name: cm.Name, Key: key, Keys: keys}
}

// BuildConfigMap returns the ConfigMap that holds data under key: labelled
// as dkc's, with TypeMeta set, and named NAME-HASH when appendHash is set.
// The hash covers kind, name, data and immutable, not labels or namespace,
// as kubectl's does.
func BuildConfigMap(namespace, name, key string, data []byte, appendHash, immutable bool) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: namespace,
			Labels:    map[string]string{ConfigLabel: "true"},
		},
		Data: map[string]string{key: string(data)},
	}
	if immutable {
		cm.Immutable = ptr.To(true)
	}
	if appendHash {
		hashed, err := kubeletconfig.ConfigMapHashName(cm)
		if err != nil {
			return nil, err
		}
		cm.Name = hashed
	}
	return cm, nil
}
