package kubeletconfig

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const kubeletYAML = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 50\n"

func TestConfigMapHashName(t *testing.T) {
	// Vectors from DESIGN.md and from `kubectl create configmap --append-hash`
	// (or, for immutable, which kubectl create cannot set, from sha256 of the
	// JSON shown).
	tests := map[string]struct {
		cm   *corev1.ConfigMap
		want string
	}{
		`{"data":{},"kind":"ConfigMap","name":"a"}`: {
			cm:   &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
			want: "a-586ff7h6km",
		},
		"empty data hashes like nil data": {
			cm:   &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string]string{}},
			want: "a-586ff7h6km",
		},
		"empty binaryData is left out": {
			cm:   &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}, BinaryData: map[string][]byte{}},
			want: "a-586ff7h6km",
		},
		"kubelet key": {
			cm: &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "my-node-config", Namespace: "kube-system", Labels: map[string]string{"ignored": "yes"}},
				Data:       map[string]string{"kubelet": kubeletYAML},
			},
			want: "my-node-config-955th295fd",
		},
		"binary data": {
			cm: &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "a"},
				BinaryData: map[string][]byte{"kubelet": []byte("a\x00\xff")},
			},
			want: "a-5gb4f6b572",
		},
		"immutable true": {
			cm:   &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string]string{"k": "v"}, Immutable: ptr.To(true)},
			want: "a-hcbcc555b4",
		},
		"immutable false still counts": {
			cm:   &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string]string{"k": "v"}, Immutable: ptr.To(false)},
			want: "a-cd4c5g6t8c",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ConfigMapHashName(tc.cm)
			if err != nil {
				t.Fatalf("ConfigMapHashName() error: %v", err)
			}
			if got != tc.want {
				t.Errorf("ConfigMapHashName() = %q, want %q", got, tc.want)
			}
			suffix, err := ConfigMapHash(tc.cm)
			if err != nil {
				t.Fatalf("ConfigMapHash() error: %v", err)
			}
			if want := tc.want[len(tc.cm.Name)+1:]; suffix != want {
				t.Errorf("ConfigMapHash() = %q, want %q", suffix, want)
			}
		})
	}
}

// TestConfigMapHashNameMatchesKubectl compares names byte for byte with
// `kubectl create configmap --from-file=kubelet=FILE --append-hash`.
func TestConfigMapHashNameMatchesKubectl(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not on PATH, so names cannot be compared with kubectl's")
	}
	tests := map[string]struct {
		name    string
		content []byte
	}{
		"multi-line yaml": {
			name:    "my-node-config",
			content: []byte(kubeletYAML + "evictionHard:\n  memory.available: 100Mi\n  nodefs.available: \"10%\"\nfeatureGates:\n  Foo: true\n"),
		},
		"json from configz": {
			name:    "node-1-config",
			content: []byte(`{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1","maxPods":110}`),
		},
		"unicode and characters json escapes": {
			name:    "unicode",
			content: []byte("# Überprüfung ✓ 設定 <b>&amp;</b> \"quoted\" \\ tab\t\u2028\n\x01 maxPods: 3\n"),
		},
		"no trailing newline": {
			name:    "a",
			content: []byte("maxPods: 3"),
		},
		"empty file": {
			name:    "a",
			content: nil,
		},
		"binary content goes to binaryData": {
			name:    "bin",
			content: []byte("\x00\x01\xfe\xffkubelet\x80"),
		},
	}
	dir := t.TempDir()
	// An empty kubeconfig and HOME keep kubectl away from any real cluster;
	// --dry-run=client does not need one.
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "kubelet")
			if err := os.WriteFile(file, tc.content, 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, kubectl, "create", "configmap", tc.name,
				"--from-file=kubelet="+file, "--append-hash", "--dry-run=client", "-o", "jsonpath={.metadata.name}")
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "KUBECONFIG=" + kubeconfig}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			want, err := cmd.Output()
			if err != nil {
				t.Fatalf("kubectl: %v: %s", err, stderr.String())
			}

			// kubectl puts content that is not valid UTF-8 in binaryData.
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: tc.name}}
			if utf8.Valid(tc.content) {
				cm.Data = map[string]string{"kubelet": string(tc.content)}
			} else {
				cm.BinaryData = map[string][]byte{"kubelet": tc.content}
			}
			got, err := ConfigMapHashName(cm)
			if err != nil {
				t.Fatalf("ConfigMapHashName() error: %v", err)
			}
			if got != string(want) {
				t.Errorf("ConfigMapHashName() = %q, kubectl says %q", got, want)
			}
		})
	}
}
