package source

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPayload(t *testing.T) {
	configMap := func(data map[string]string, binary map[string][]byte) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cm"},
			Data:       data,
			BinaryData: binary,
		}
	}
	tests := map[string]struct {
		cm      *corev1.ConfigMap
		key     string
		want    string
		wantErr string
	}{
		"data":                {cm: configMap(map[string]string{"kubelet": "{}"}, nil), key: "kubelet", want: "{}"},
		"empty value in data": {cm: configMap(map[string]string{"kubelet": ""}, nil), key: "kubelet", want: ""},
		"binaryData":          {cm: configMap(map[string]string{"x": ""}, map[string][]byte{"kubelet": []byte("kind: K")}), key: "kubelet", want: "kind: K"},
		"missing, lists data and binaryData keys sorted": {
			cm:      configMap(map[string]string{"z": "", "a": ""}, map[string][]byte{"m": nil}),
			key:     "kubelet",
			wantErr: `configmap "kube-system/cm" has no key "kubelet": it has a, m, z`,
		},
		"no keys": {
			cm:      configMap(nil, nil),
			key:     "kubelet",
			wantErr: `configmap "kube-system/cm" has no key "kubelet": it has no keys at all`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Payload(tc.cm, tc.key)
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Fatalf("Payload() error (-want +got):\n%s", diff)
			}
			if err != nil {
				if !errors.Is(err, ErrKeyNotFound) {
					t.Errorf("Payload() error %v does not match ErrKeyNotFound", err)
				}
				return
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("Payload() (-want +got):\n%s", diff)
			}
		})
	}
}

// kubeletConfig is the content whose hashed names TestBuildConfigMap knows.
const kubeletConfig = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 10\n"

func TestBuildConfigMap(t *testing.T) {
	tests := map[string]struct {
		appendHash, immutable bool
		wantName              string
	}{
		// What `kubectl create configmap x --from-file=kubelet=FILE
		// --append-hash` names this content (kubectl v1.32.4).
		"hash as kubectl": {appendHash: true, wantName: "x-mc2b77kh2k"},
		"no hash":         {wantName: "x"},
		// kubectl 1.32 has no --immutable flag; computed with Python from
		// kubectl's definition, with "immutable": true in the hashed JSON.
		"immutable enters hash":  {appendHash: true, immutable: true, wantName: "x-c64g58c56t"},
		"immutable without hash": {immutable: true, wantName: "x"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cm, err := BuildConfigMap("ns", "x", "kubelet", []byte(kubeletConfig), tc.appendHash, tc.immutable)
			if err != nil {
				t.Fatal(err)
			}
			want := &corev1.ConfigMap{
				TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
				ObjectMeta: metav1.ObjectMeta{
					Name:      tc.wantName,
					Namespace: "ns",
					Labels:    map[string]string{ConfigLabel: "true"},
				},
				Data: map[string]string{"kubelet": kubeletConfig},
			}
			if tc.immutable {
				v := true
				want.Immutable = &v
			}
			if diff := cmp.Diff(want, cm); diff != "" {
				t.Errorf("BuildConfigMap() (-want +got):\n%s", diff)
			}
		})
	}
}
