package agent

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/pkg/status"
)

// maxAnnotationsBytes is the apiserver's limit on all of an object's
// annotations together (apimachinery's TotalAnnotationSizeLimitB).
const maxAnnotationsBytes = 256 << 10

// TestEveryReportFits: a refusal of any size reaches the Node. A config
// with 20 000 feature gates, stored raw and assigned, used to make a
// status the apiserver refuses (the annotations went past 256 KiB), so
// every report failed and nothing showed. Every message the agent reports
// (status error, condition, Events, history) shows its first fields, then
// how many more, and keeps its upstream status string and what to do.
func TestEveryReportFits(t *testing.T) {
	gates := map[string]bool{}
	unknown := map[string]any{}
	for i := range 20000 {
		gates[fmt.Sprintf("DKCTestGate%05d", i)] = true
		unknown[fmt.Sprintf("noSuchField%05d", i)] = i
	}
	doc := func(fields map[string]any) string {
		cfg := map[string]any{"kind": "KubeletConfiguration", "apiVersion": "kubelet.config.k8s.io/v1beta1", "maxPods": 110}
		for k, v := range fields {
			cfg[k] = v
		}
		b, err := json.Marshal(cfg)
		must(t, err)
		return string(b)
	}
	tests := map[string]struct {
		payload string
		// want are in the status error, the condition and the Event.
		want []string
	}{
		"20 000 feature gates": {
			payload: doc(map[string]any{"featureGates": gates}),
			want:    []string{status.ValidateError + ": refused unsafe change: featureGates[\"DKCTestGate00000\"]", "more; to allow them, assign again with --allow-unsafe=host-access"},
		},
		"20 000 unknown fields": {
			payload: doc(unknown),
			want:    []string{status.LoadError + ": ", `unknown field "noSuchField00000"`},
		},
		"one value of 1 MiB": {
			payload: doc(map[string]any{"staticPodURL": "http://198.51.100.9/" + strings.Repeat("x", 1<<20)}),
			want:    []string{status.ValidateError + ": refused unsafe change: staticPodURL", "--allow-unsafe=host-access"},
		},
	}
	more := regexp.MustCompile(`and [0-9]+ more`)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.configMap(t, "big", tc.payload, nil)
			e.assign(t, "big")
			e.sync(t)

			node := e.node(t)
			total := 0
			for k, v := range node.Annotations {
				total += len(k) + len(v)
			}
			// Ten history entries and the status must fit together.
			if total > maxAnnotationsBytes/8 {
				t.Errorf("annotations take %d bytes, want at most %d", total, maxAnnotationsBytes/8)
			}
			st := e.status(t)
			cond := source.Condition(node.Status.Conditions)
			if cond == nil {
				t.Fatal("no condition")
			}
			var events []string
			for len(e.recorder.Events) > 0 {
				events = append(events, <-e.recorder.Events)
			}
			if len(events) != 1 || !strings.HasPrefix(events[0], "Warning Refused ") {
				t.Fatalf("events %.200q, want one Warning Refused", events)
			}
			for what, msg := range map[string]string{"status error": st.Error, "condition message": cond.Message, "event": strings.TrimPrefix(events[0], "Warning Refused ")} {
				if len(msg) > 4096 {
					t.Errorf("%s has %d bytes, want at most 4096", what, len(msg))
				}
				if !more.MatchString(msg) {
					t.Errorf("%s %.300q... does not say how many more", what, msg)
				}
				for _, w := range tc.want {
					if !strings.Contains(msg, w) {
						t.Errorf("%s %.300q... does not contain %q", what, msg, w)
					}
				}
			}
		})
	}
}
