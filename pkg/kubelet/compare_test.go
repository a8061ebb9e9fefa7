package kubelet

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCompareConfig(t *testing.T) {
	// got is shaped like configz's .kubeletconfig: defaults filled in,
	// empty fields omitted.
	const got = `{
		"kind": "KubeletConfiguration", "apiVersion": "kubelet.config.k8s.io/v1beta1",
		"maxPods": 110, "port": 10250, "syncFrequency": "1m0s", "cgroupDriver": "cgroupfs",
		"cgroupsPerQOS": false, "enforceNodeAllocatable": ["none"],
		"evictionHard": {"memory.available": "100Mi", "nodefs.available": "10%"},
		"kubeReserved": {"memory": "1Gi"},
		"authentication": {"anonymous": {"enabled": false}, "webhook": {"enabled": true, "cacheTTL": "2m0s"}},
		"featureGates": {"A": true}
	}`
	tests := map[string]struct {
		want string
		diff []string
	}{
		"equal fields": {
			want: "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 110\ncgroupDriver: cgroupfs\nenforceNodeAllocatable: [none]\n",
		},
		"kind and apiVersion are not compared": {
			want: `{"kind":"Other","apiVersion":"v9","maxPods":110}`,
		},
		"numbers compare numerically": {
			want: `{"maxPods":110.0,"port":1.025e4}`,
		},
		"durations normalise": {
			want: `{"syncFrequency":"60s","authentication":{"webhook":{"cacheTTL":"120s"}}}`,
		},
		"quantities normalise": {
			want: `{"kubeReserved":{"memory":"1024Mi"}}`,
		},
		"omitted zero values match": {
			want: `{"readOnlyPort":0,"resolvConf":"","failSwapOn":false,"tlsCipherSuites":[],"staticPodURLHeader":{}}`,
		},
		// kubeadm writes every duration it leaves to the kubelet as 0s
		// and logging.flushFrequency as 0; the kubelet defaults them.
		"zero scalars are unset: the kubelet defaults them": {
			want: `{"syncFrequency":"0s","maxPods":0,"cgroupDriver":"","authentication":{"webhook":{"cacheTTL":"0s","enabled":true}}}`,
		},
		"false is not unset": {
			want: `{"authentication":{"webhook":{"enabled":false}}}`,
			diff: []string{"authentication.webhook.enabled is true, want false"},
		},
		"null is skipped": {
			want: `{"featureGates":null,"maxPods":null}`,
		},
		"one number differs": {
			want: `{"maxPods":42}`,
			diff: []string{"maxPods is 110, want 42"},
		},
		"several differ, sorted by path": {
			want: `{"maxPods":42,"cgroupDriver":"systemd","evictionHard":{"memory.available":"1Gi"},"authentication":{"webhook":{"cacheTTL":"1m"}},"cgroupsPerQOS":true}`,
			diff: []string{
				`authentication.webhook.cacheTTL is "2m0s", want "1m"`,
				`cgroupDriver is "cgroupfs", want "systemd"`,
				"cgroupsPerQOS is false, want true",
				`evictionHard["memory.available"] is "100Mi", want "1Gi"`,
				"maxPods is 110, want 42",
			},
		},
		"missing non-zero field": {
			want: `{"readOnlyPort":10255,"featureGates":{"B":false,"C":true}}`,
			diff: []string{"featureGates.C is not set, want true", "readOnlyPort is not set, want 10255"},
		},
		"lists compare whole": {
			want: `{"enforceNodeAllocatable":["pods"]}`,
			diff: []string{`enforceNodeAllocatable is ["none"], want ["pods"]`},
		},
		"type differs": {
			want: `{"maxPods":"110","evictionHard":"none"}`,
			diff: []string{
				`evictionHard is {"memory.available":"100Mi","nodefs.available":"10%"}, want "none"`,
				`maxPods is 110, want "110"`,
			},
		},
		"1m is a minute, not a milli-quantity": {
			want: `{"syncFrequency":"1m"}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			diff, err := CompareConfig([]byte(tc.want), []byte(got))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.diff, diff); d != "" {
				t.Errorf("CompareConfig (-want +got):\n%s", d)
			}
		})
	}
}

func TestCompareConfigErrors(t *testing.T) {
	tests := map[string]struct {
		want, got string
		wantErr   string
	}{
		"want is not an object": {want: "[1]", got: "{}", wantErr: "compare config: want: json: cannot unmarshal array into Go value of type map[string]interface {}"},
		"got is not YAML":       {want: "{}", got: "a: [", wantErr: "compare config: got: yaml: line 1: did not find expected node content"},
		"want is null":          {want: "null", got: "{}", wantErr: "compare config: want: not an object"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := CompareConfig([]byte(tc.want), []byte(tc.got))
			if got := errString(err); got != tc.wantErr {
				t.Errorf("error = %q, want %q", got, tc.wantErr)
			}
		})
	}
}
