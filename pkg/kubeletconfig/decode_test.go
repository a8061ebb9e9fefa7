package kubeletconfig

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

const header = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\n"

// typeMeta is what every decoded config carries.
var typeMeta = metav1.TypeMeta{Kind: Kind, APIVersion: APIVersion}

func TestDecode(t *testing.T) {
	tests := map[string]struct {
		data         string
		opts         DecodeOptions
		want         *kubeletconfigv1beta1.KubeletConfiguration
		wantWarnings []string
		wantErr      string
	}{
		"yaml": {
			data: header + "maxPods: 42\nsyncFrequency: 30s\nauthentication:\n  anonymous:\n    enabled: false\n",
			want: &kubeletconfigv1beta1.KubeletConfiguration{
				TypeMeta:       typeMeta,
				MaxPods:        42,
				SyncFrequency:  metav1.Duration{Duration: 30e9},
				Authentication: kubeletconfigv1beta1.KubeletAuthentication{Anonymous: kubeletconfigv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)}},
			},
		},
		"json": {
			data: `{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1","maxPods":42,"evictionHard":{"memory.available":"100Mi"}}`,
			want: &kubeletconfigv1beta1.KubeletConfiguration{
				TypeMeta:     typeMeta,
				MaxPods:      42,
				EvictionHard: map[string]string{"memory.available": "100Mi"},
			},
		},
		"only kind and apiVersion: no defaults applied": {
			data: header,
			want: &kubeletconfigv1beta1.KubeletConfiguration{TypeMeta: typeMeta},
		},
		"missing kind (configz output before 1.36)": {
			data:    "apiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 3\n",
			wantErr: `load kubelet config: missing "kind": add kind: KubeletConfiguration`,
		},
		"missing apiVersion": {
			data:    "kind: KubeletConfiguration\n",
			wantErr: `load kubelet config: missing "apiVersion": add apiVersion: kubelet.config.k8s.io/v1beta1`,
		},
		"missing both": {
			data:    `{"maxPods":3}`,
			wantErr: `load kubelet config: missing "kind": add kind: KubeletConfiguration, missing "apiVersion": add apiVersion: kubelet.config.k8s.io/v1beta1`,
		},
		"empty document": {
			data:    "",
			wantErr: `load kubelet config: missing "kind": add kind: KubeletConfiguration, missing "apiVersion": add apiVersion: kubelet.config.k8s.io/v1beta1`,
		},
		"wrong kind": {
			data:    "kind: KubeProxyConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\n",
			wantErr: `load kubelet config: kind "KubeProxyConfiguration" is not supported: want kind: KubeletConfiguration`,
		},
		"wrong apiVersion": {
			data:    "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1\n",
			wantErr: `load kubelet config: apiVersion "kubelet.config.k8s.io/v1" is not supported: want apiVersion: kubelet.config.k8s.io/v1beta1`,
		},
		"kind is not a string": {
			data:    "kind: 3\napiVersion: kubelet.config.k8s.io/v1beta1\n",
			wantErr: `load kubelet config: kind "3" is not supported: want kind: KubeletConfiguration`,
		},
		"not an object": {
			data:    "[1, 2]",
			wantErr: "load kubelet config: parse document: must be a JSON or YAML object",
		},
		"broken yaml": {
			data:    header + "maxPods: [\n",
			wantErr: "load kubelet config: parse document: yaml: line 3: did not find expected node content",
		},
		"unknown fields are errors": {
			data:    header + "maxPod: 3\nauthentication:\n  anonymous:\n    enable: true\n",
			wantErr: `load kubelet config: unknown field "authentication.anonymous.enable", unknown field "maxPod"`,
		},
		"unknown fields are warnings when allowed": {
			data: header + "maxPod: 3\nmaxPods: 4\n",
			opts: DecodeOptions{AllowUnknownFields: true},
			want: &kubeletconfigv1beta1.KubeletConfiguration{
				TypeMeta: typeMeta,
				MaxPods:  4,
			},
			wantWarnings: []string{`unknown field "maxPod"`},
		},
		"duplicate json field": {
			data:    `{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1","maxPods":3,"maxPods":4}`,
			wantErr: `load kubelet config: duplicate field "maxPods"`,
		},
		"duplicate yaml fields name the key and line": {
			data:    header + "maxPods: 3\nmaxPods: 4\nauthentication:\n  anonymous:\n    enabled: true\n    enabled: false\n",
			wantErr: `load kubelet config: duplicate field "maxPods" (line 4), duplicate field "enabled" (line 8)`,
		},
		"duplicate fields stay errors when unknown fields are allowed": {
			data:    `{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1","maxPods":3,"maxPods":4,"foo":1}`,
			opts:    DecodeOptions{AllowUnknownFields: true},
			wantErr: `load kubelet config: duplicate field "maxPods"`,
		},
		"wrong type names the field": {
			data:    header + "maxPods: many\n",
			wantErr: "load kubelet config: maxPods: cannot decode string as int32",
		},
		"bad duration names the field": {
			data:    header + "syncFrequency: 10x\n",
			wantErr: `load kubelet config: syncFrequency: time: unknown unit "x" in duration "10x"`,
		},
		"bad nested duration names the path": {
			data:    header + "authentication:\n  webhook:\n    cacheTTL: 2 minutes\n",
			wantErr: `load kubelet config: authentication.webhook.cacheTTL: time: unknown unit " minutes" in duration "2 minutes"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, warnings, err := Decode([]byte(tc.data), tc.opts)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("Decode() succeeded, want error %q", tc.wantErr)
				}
				if err.Error() != tc.wantErr {
					t.Errorf("Decode() error:\n got: %s\nwant: %s", err, tc.wantErr)
				}
				if !errors.Is(err, ErrLoad) {
					t.Errorf("Decode() error does not wrap ErrLoad: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode() error: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Decode() config mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWarnings, warnings); diff != "" {
				t.Errorf("Decode() warnings mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodePartial(t *testing.T) {
	tests := map[string]struct {
		data         string
		opts         DecodeOptions
		want         string
		wantWarnings []string
		wantErr      string
	}{
		"yaml overlay becomes json": {
			data: header + "maxPods: 50\n",
			want: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":50}`,
		},
		"null is kept so that the merge deletes": {
			data: header + "evictionHard:\n  memory.available: null\nreadOnlyPort: null\n",
			want: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","evictionHard":{"memory.available":null},"kind":"KubeletConfiguration","readOnlyPort":null}`,
		},
		"still needs kind": {
			data:    "apiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 50\n",
			wantErr: `load kubelet config: missing "kind": add kind: KubeletConfiguration`,
		},
		"still strict": {
			data:    header + "maxPodz: 50\n",
			wantErr: `load kubelet config: unknown field "maxPodz"`,
		},
		"unknown fields allowed as warnings": {
			data:         header + "maxPodz: 50\n",
			opts:         DecodeOptions{AllowUnknownFields: true},
			want:         `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPodz":50}`,
			wantWarnings: []string{`unknown field "maxPodz"`},
		},
		"still checks types": {
			data:    header + "maxPods: lots\n",
			wantErr: "load kubelet config: maxPods: cannot decode string as int32",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, warnings, err := DecodePartial([]byte(tc.data), tc.opts)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("DecodePartial() succeeded, want error %q", tc.wantErr)
				}
				if err.Error() != tc.wantErr {
					t.Errorf("DecodePartial() error:\n got: %s\nwant: %s", err, tc.wantErr)
				}
				if !errors.Is(err, ErrLoad) {
					t.Errorf("DecodePartial() error does not wrap ErrLoad: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodePartial() error: %v", err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("DecodePartial() mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWarnings, warnings); diff != "" {
				t.Errorf("DecodePartial() warnings mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
