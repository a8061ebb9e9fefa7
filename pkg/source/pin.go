package source

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Pin is what the assigner decided beyond the reference: the digest of the
// bytes the node may apply and the unsafe classes it may apply them with.
// A ConfigMap only carries bytes; whoever may write it decides nothing. The
// pin lives in PinAnnotation, beside the assignment on either carrier (the
// native spec.configSource has no field for it), and is written in the same
// patch as the assignment.
type Pin struct {
	// Namespace, Name and KubeletConfigKey name the reference the pin was
	// made for. A pin that names another reference pins nothing.
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// +kubebuilder:validation:MaxLength=253
	KubeletConfigKey string `json:"kubeletConfigKey"`
	// Digest is the sha256 of the payload, as Digest returns it.
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	Digest string `json:"digest"`
	// AllowUnsafe lists the safety classes (kubeletconfig.SafetyClass) the
	// assigner allows the payload to change, sorted.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	AllowUnsafe []string `json:"allowUnsafe,omitempty"`
}

// DigestPrefix starts every digest.
const DigestPrefix = "sha256:"

// Digest is the digest a Pin records for payload: "sha256:" and the hex
// sha256 of the bytes as stored under the ConfigMap's key.
func Digest(payload []byte) string {
	sum := sha256.Sum256(payload)
	return DigestPrefix + hex.EncodeToString(sum[:])
}

// ValidDigest reports whether d is a digest as Digest writes it: "sha256:"
// and 64 lowercase hex digits (the pattern of a pool's spec.digest).
func ValidDigest(d string) bool {
	hexPart, ok := strings.CutPrefix(d, DigestPrefix)
	if !ok || len(hexPart) != 2*sha256.Size {
		return false
	}
	for _, c := range hexPart {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ShortDigest is d shortened for tables and messages: the prefix and the
// first 12 hex digits.
func ShortDigest(d string) string {
	if len(d) > len(DigestPrefix)+12 && strings.HasPrefix(d, DigestPrefix) {
		return d[:len(DigestPrefix)+12]
	}
	return d
}

// NewPin pins payload, the bytes under src's key, with the unsafe classes
// allowUnsafe, for the reference src. src must name a ConfigMap.
func NewPin(src *corev1.NodeConfigSource, payload []byte, allowUnsafe []string) *Pin {
	ref := src.ConfigMap
	allow := slices.Clone(allowUnsafe)
	slices.Sort(allow)
	return &Pin{
		Namespace:        ref.Namespace,
		Name:             ref.Name,
		KubeletConfigKey: ref.KubeletConfigKey,
		Digest:           Digest(payload),
		AllowUnsafe:      slices.Compact(allow),
	}
}

// For reports whether p pins the reference src: the same namespace, name
// and key. A nil pin pins nothing.
func (p *Pin) For(src *corev1.NodeConfigSource) bool {
	if p == nil || src == nil || src.ConfigMap == nil {
		return false
	}
	ref := src.ConfigMap
	return p.Namespace == ref.Namespace && p.Name == ref.Name && p.KubeletConfigKey == ref.KubeletConfigKey
}

// Equal reports whether p and q are the same pin; two nil pins are equal.
func (p *Pin) Equal(q *Pin) bool {
	if p == nil || q == nil {
		return p == q
	}
	return p.Namespace == q.Namespace && p.Name == q.Name && p.KubeletConfigKey == q.KubeletConfigKey &&
		p.Digest == q.Digest && slices.Equal(p.AllowUnsafe, q.AllowUnsafe)
}

// DeepCopy returns a copy of p.
func (p *Pin) DeepCopy() *Pin {
	if p == nil {
		return nil
	}
	out := *p
	out.AllowUnsafe = slices.Clone(p.AllowUnsafe)
	return &out
}

// Describe is the pin for messages: its short digest, and the classes it
// allows.
func (p *Pin) Describe() string {
	if p == nil {
		return "<unpinned>"
	}
	s := ShortDigest(p.Digest)
	if len(p.AllowUnsafe) > 0 {
		s += " allow-unsafe=" + strings.Join(p.AllowUnsafe, ",")
	}
	return s
}

// PinOf returns node's pin, or nil when it has none. Like Assigned, it
// returns the pin as stored; whether it pins the assignment is For's answer.
func PinOf(node *corev1.Node) (*Pin, error) {
	p := &Pin{}
	ok, err := fromAnnotation(node, PinAnnotation, p)
	if err != nil || !ok {
		return nil, err
	}
	return p, nil
}

// Holds reports whether node holds the assignment src pinned by pin: the
// same reference and the same pin. A node whose assignment cannot be read
// holds nothing.
func Holds(node *corev1.Node, src *corev1.NodeConfigSource, pin *Pin) bool {
	cur, _, err := Assigned(node)
	if err != nil || !Equal(cur, src) {
		return false
	}
	if src == nil {
		return true
	}
	got, err := PinOf(node)
	return err == nil && got.Equal(pin)
}
