package source

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
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
