package flagz_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-dkc/dkc/pkg/flagz"
	"github.com/kubectl-dkc/dkc/pkg/flagz/flagztest"
)

func TestConflicts(t *testing.T) {
	// Every flag as /flagz lists it: with its default unless given.
	given := flagztest.Listed
	tests := map[string]struct {
		flags    map[string]string
		payload  string
		shadowed []flagz.Shadow
		want     []flagz.Shadow
	}{
		"no flag given": {
			flags:   given(),
			payload: "kind: KubeletConfiguration\nmaxPods: 42\n",
		},
		"a flag given, the config changes its field": {
			flags:    given("max-pods", "50", "config", "/x"),
			payload:  "kind: KubeletConfiguration\nmaxPods: 42\nserializeImagePulls: false\n",
			shadowed: []flagz.Shadow{{Field: "maxPods", Flag: "max-pods", Value: "50"}},
			want:     []flagz.Shadow{{Field: "maxPods", Flag: "max-pods", Value: "50"}},
		},
		"a flag given, the config has its value (a snapshot)": {
			flags:    given("max-pods", "50"),
			payload:  `{"kind":"KubeletConfiguration","maxPods":50}`,
			shadowed: []flagz.Shadow{{Field: "maxPods", Flag: "max-pods", Value: "50"}},
		},
		"a flag given, the config leaves the field out (a drop-in)": {
			flags:    given("cgroup-driver", "systemd"),
			payload:  "kind: KubeletConfiguration\nmaxPods: 42\n",
			shadowed: []flagz.Shadow{{Field: "cgroupDriver", Flag: "cgroup-driver", Value: "systemd"}},
		},
		"strings and booleans": {
			flags:   given("cgroup-driver", "systemd", "fail-swap-on", "false"),
			payload: "cgroupDriver: cgroupfs\nfailSwapOn: true\n",
			shadowed: []flagz.Shadow{
				{Field: "cgroupDriver", Flag: "cgroup-driver", Value: "systemd"},
				{Field: "failSwapOn", Flag: "fail-swap-on", Value: "false"},
			},
			want: []flagz.Shadow{
				{Field: "cgroupDriver", Flag: "cgroup-driver", Value: "systemd"},
				{Field: "failSwapOn", Flag: "fail-swap-on", Value: "false"},
			},
		},
		"a payload that does not decode": {
			flags:    given("max-pods", "50"),
			payload:  "maxPods: [",
			shadowed: []flagz.Shadow{{Field: "maxPods", Flag: "max-pods", Value: "50"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			shadowed := flagz.Shadowed(tc.flags)
			if diff := cmp.Diff(tc.shadowed, shadowed); diff != "" {
				t.Errorf("Shadowed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, flagz.Conflicts([]byte(tc.payload), shadowed)); diff != "" {
				t.Errorf("Conflicts (-want +got):\n%s", diff)
			}
		})
	}
}
