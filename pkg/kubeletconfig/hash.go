package kubeletconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// hashEncoding maps hex digits the way kubectl does, so that a suffix never
// spells a word nor looks like a number (0→g 1→h 3→k a→m e→t).
var hashEncoding = strings.NewReplacer("0", "g", "1", "h", "3", "k", "a", "m", "e", "t")

// ConfigMapHash returns the suffix that
// `kubectl create configmap --append-hash` appends to cm's name.
//
// It hashes the JSON of {"kind": "ConfigMap", "name", "data"} plus
// "binaryData" when non-empty and "immutable" when set, takes the first 10
// hex digits of its sha256 and maps them like kubectl. A nil cm.Data hashes
// as {}, because kubectl create always starts from an empty data map.
func ConfigMapHash(cm *corev1.ConfigMap) (string, error) {
	data := cm.Data
	if data == nil {
		data = map[string]string{}
	}
	m := map[string]any{
		"kind": "ConfigMap",
		"name": cm.Name,
		"data": data,
	}
	if len(cm.BinaryData) > 0 {
		m["binaryData"] = cm.BinaryData
	}
	if cm.Immutable != nil {
		m["immutable"] = *cm.Immutable
	}
	// encoding/json sorts map keys and escapes HTML, exactly as kubectl's
	// json.Marshal does.
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("hash configmap %q: %w", cm.Name, err)
	}
	sum := sha256.Sum256(b)
	return hashEncoding.Replace(hex.EncodeToString(sum[:])[:10]), nil
}

// ConfigMapHashName returns cm's name with the hash suffix appended,
// "NAME-SUFFIX", as `kubectl create configmap --append-hash` names it.
func ConfigMapHashName(cm *corev1.ConfigMap) (string, error) {
	h, err := ConfigMapHash(cm)
	if err != nil {
		return "", err
	}
	return cm.Name + "-" + h, nil
}
