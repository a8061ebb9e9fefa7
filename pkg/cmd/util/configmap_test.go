package util

import (
	"testing"
)

func TestConfigMapName(t *testing.T) {
	tests := map[string]struct {
		ref, want, wantErr string
	}{
		"name":                   {ref: "my-config-5fd8t4bhgb", want: "my-config-5fd8t4bhgb"},
		"push -o name":           {ref: "configmap/my-config-5fd8t4bhgb", want: "my-config-5fd8t4bhgb"},
		"plural":                 {ref: "configmaps/c", want: "c"},
		"short":                  {ref: "cm/c", want: "c"},
		"kind's case":            {ref: "ConfigMap/c", want: "c"},
		"empty: --config unset":  {ref: ""},
		"another type":           {ref: "secret/c", wantErr: `"secret" is not a ConfigMap type: write NAME or configmap/NAME`},
		"a node":                 {ref: "node/n1", wantErr: `"node" is not a ConfigMap type: write NAME or configmap/NAME`},
		"no name":                {ref: "configmap/", wantErr: `no name after "configmap/": write NAME or configmap/NAME`},
		"namespace in reference": {ref: "configmap/ops/c", wantErr: "write NAME or configmap/NAME, and the namespace with -n"},
		"bad name": {
			ref:     "cm/Bad_Name",
			wantErr: `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ConfigMapName(tc.ref)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if got != tc.want || gotErr != tc.wantErr {
				t.Errorf("ConfigMapName(%q) = %q, %q; want %q, %q", tc.ref, got, gotErr, tc.want, tc.wantErr)
			}
		})
	}
}
