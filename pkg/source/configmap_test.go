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
