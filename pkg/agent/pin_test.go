package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// The agent applies only the bytes its assigner pinned. A ConfigMap that
// changes under its assignment (edited in place, or deleted and created
// again) leaves the kubelet alone, and the mismatch is reported, naming both
// digests, in the status, the condition and one Event; assigning again pins
// the new bytes and applies them.
func TestPinnedBytesOnly(t *testing.T) {
	tests := map[string]struct {
		// change changes the assigned ConfigMap a under its assignment and
		// returns the reference the node then sees.
		change func(t *testing.T, e *env) *corev1.NodeConfigSource
	}{
		"edited in place": {
			change: func(t *testing.T, e *env) *corev1.NodeConfigSource {
				e.configMap(t, "a", cfgB, nil)
				return ref("a", "11")
			},
		},
		"deleted and created again": {
			change: func(t *testing.T, e *env) *corev1.NodeConfigSource {
				cms := e.client.CoreV1().ConfigMaps("kube-system")
				must(t, cms.Delete(context.Background(), "a", metav1.DeleteOptions{}))
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "kube-system", UID: "uid-a2", ResourceVersion: "7"}, Data: map[string]string{"kubelet": cfgB}}
				if _, err := cms.Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				r := ref("a", "7")
				r.ConfigMap.UID = "uid-a2"
				return r
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.onLastKnownGood(t, "a", cfgA)
			restarts := len(e.restart.CallsSnapshot())

			changed := tc.change(t, e)
			e.sync(t)

			diff(t, "kubelet config", cfgA, string(e.writer.Current))
			diff(t, "restarts", restarts, len(e.restart.CallsSnapshot()))
			st := e.status(t)
			diff(t, "status active", ref("a", "1"), st.Active)
			diff(t, "status assigned", changed, st.Assigned)
			for _, d := range []string{source.Digest([]byte(cfgA)), source.Digest([]byte(cfgB))} {
				if !strings.Contains(st.Error, d) {
					t.Errorf("status error %q does not name digest %s", st.Error, d)
				}
			}
			diff(t, "condition", "False PinMismatch", e.condition(t))
			diff(t, "events", []string{"Warning PinMismatch"}, e.events())
			ids, err := os.ReadDir(filepath.Join(e.store.Dir(), "checkpoints"))
			must(t, err)
			if len(ids) != 1 || ids[0].Name() != "uid-a" {
				t.Errorf("checkpoints: %v, want only the pinned uid-a", ids)
			}
			// Reported once, not on every sync.
			e.sync(t)
			diff(t, "events after another sync", []string(nil), e.events())
			diff(t, "dkc_agent_pin_mismatches_total", 1.0, testutil.ToFloat64(e.a.Metrics.PinMismatches))

			// Assigning again pins the new bytes.
			e.assign(t, "a")
			e.sync(t)
			diff(t, "kubelet config after assigning again", cfgB, string(e.writer.Current))
			diff(t, "status after assigning again", &corev1.NodeConfigStatus{Assigned: changed, Active: changed, LastKnownGood: ref("a", "1")}, e.status(t))
			diff(t, "condition after assigning again", "True Trial", e.condition(t))
		})
	}
}

// An assignment without a pin for it (written by hand, or a pin for another
// ConfigMap) is not applied.
func TestUnpinnedAssignment(t *testing.T) {
	src := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "a", KubeletConfigKey: "kubelet"}}
	other := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "b", KubeletConfigKey: "kubelet"}}
	tests := map[string]struct {
		pin  *source.Pin
		want string
	}{
		"no pin": {
			want: `assignment of configmap kube-system/a key "kubelet" is not pinned (the node has no kubectl-dkc.io/config-pin annotation); the kubelet is untouched: assign it with ` + "`kubectl dkc assign n1 --config a`" + `, which pins the bytes it assigns`,
		},
		"a pin for another ConfigMap": {
			pin:  source.NewPin(other, []byte(cfgA), nil),
			want: `assignment of configmap kube-system/a key "kubelet" is not pinned (its kubectl-dkc.io/config-pin annotation pins configmap kube-system/b key "kubelet"); the kubelet is untouched: assign it with ` + "`kubectl dkc assign n1 --config a`" + `, which pins the bytes it assigns`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.configMap(t, "a", cfgA, nil)
			// The pin annotation is written apart from the assignment, as a
			// hand-made patch would.
			e.assignPinned(t, src, nil)
			if tc.pin != nil {
				value, err := jsonString(tc.pin)
				must(t, err)
				patch := []byte(`{"metadata":{"annotations":{"` + source.PinAnnotation + `":` + value + `}}}`)
				if _, err := e.client.CoreV1().Nodes().Patch(context.Background(), nodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
			}

			e.sync(t)

			diff(t, "status", &corev1.NodeConfigStatus{Assigned: ref("a", "1"), Error: tc.want}, e.status(t))
			diff(t, "kubelet config", local, string(e.writer.Current))
			diff(t, "restarter calls", []string(nil), e.restart.CallsSnapshot())
			diff(t, "condition", "False PinMismatch", e.condition(t))
		})
	}
}

// Only the assigned key reaches the node's disk, and only once its checks
// passed: the ConfigMap's other keys are not the assigner's.
func TestOnlyTheAssignedKeyIsCheckpointed(t *testing.T) {
	e := newEnv(t)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "kube-system", UID: "uid-a", ResourceVersion: "1"},
		Data:       map[string]string{"kubelet": cfgA, "payload.sh": "#!/bin/sh\nid\n"},
		BinaryData: map[string][]byte{"blob": {0, 1, 2}},
	}
	if _, err := e.client.CoreV1().ConfigMaps("kube-system").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.assign(t, "a")
	e.sync(t)

	diff(t, "kubelet config", cfgA, string(e.writer.Current))
	files, err := os.ReadDir(filepath.Join(e.store.Dir(), "checkpoints", "uid-a", "1"))
	must(t, err)
	var names []string
	for _, f := range files {
		names = append(names, f.Name())
	}
	diff(t, "checkpointed files", []string{"kubelet"}, names)
}

// jsonString is v as a JSON string value holding v's JSON.
func jsonString(v any) (string, error) {
	inner, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	outer, err := json.Marshal(string(inner))
	return string(outer), err
}

// A change is judged against what the kubelet runs as well as its config
// file: a config from a snapshot spells out what the kubelet computed or
// took from its flags (here its serving certificate under its cert dir),
// and setting a field to what the kubelet runs changes nothing. Without an
// answer from the kubelet, the file alone judges, and such a field is
// refused.
func TestChangesJudgedAgainstTheRunningKubelet(t *testing.T) {
	snapshot := `{` + header + `,"maxPods":42,"tlsCertFile":"/var/lib/kubelet/pki/kubelet.crt"}`
	tests := map[string]struct {
		live      string
		wantError string
	}{
		"the kubelet runs the snapshot's value": {
			live: `{"maxPods":110,"tlsCertFile":"/var/lib/kubelet/pki/kubelet.crt"}`,
		},
		"the kubelet runs another value": {
			live:      `{"maxPods":110,"tlsCertFile":"/etc/kubernetes/pki/kubelet.crt"}`,
			wantError: `failed to validate config, see Kubelet log for details: refused unsafe change: tlsCertFile "" -> "/var/lib/kubelet/pki/kubelet.crt" (host-access); to allow it, assign again with --allow-unsafe=host-access`,
		},
		"the kubelet does not answer": {
			wantError: `failed to validate config, see Kubelet log for details: refused unsafe change: tlsCertFile "" -> "/var/lib/kubelet/pki/kubelet.crt" (host-access); to allow it, assign again with --allow-unsafe=host-access`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			if tc.live != "" {
				e.prober.Live = []byte(tc.live)
			}
			e.configMap(t, "a", snapshot, nil)
			e.assign(t, "a")
			e.sync(t)
			diff(t, "status error", tc.wantError, e.status(t).Error)
			if tc.wantError == "" {
				diff(t, "kubelet config", snapshot, string(e.writer.Current))
			} else {
				diff(t, "kubelet config", local, string(e.writer.Current))
			}
		})
	}
}

// Values that cannot be right on the node are refused before the kubelet
// is touched, whatever the assignment allows, naming the bound.
func TestBoundsRefusedBeforeKubelet(t *testing.T) {
	e := newEnv(t)
	node := e.node(t)
	node.Status.Capacity = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("110")}
	if _, err := e.client.CoreV1().Nodes().UpdateStatus(context.Background(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	payload := `{` + header + `,"maxPods":110,"evictionHard":{"memory.available":"100%"}}`
	e.configMap(t, "a", payload, nil)
	e.assign(t, "a", "security", "host-access")

	e.sync(t)

	st := e.status(t)
	for _, want := range []string{"refused: cannot be right on this node", "evictionHard", "memory.available"} {
		if !strings.Contains(st.Error, want) {
			t.Errorf("status error %q does not contain %q", st.Error, want)
		}
	}
	diff(t, "kubelet config", local, string(e.writer.Current))
	diff(t, "restarter calls", []string(nil), e.restart.CallsSnapshot())
	diff(t, "condition", "False Refused", e.condition(t))
}

// The lease bound is judged against --node-monitor-grace-period: a lease of
// 120s (two renewals with jitter: 62.4s) is refused under the default 50s,
// and applied on a cluster whose grace period is 2m.
func TestNodeMonitorGracePeriodBounds(t *testing.T) {
	payload := `{` + header + `,"maxPods":110,"nodeLeaseDurationSeconds":120}`
	tests := map[string]struct {
		grace         time.Duration
		wantCondition string
		wantError     string
	}{
		"default grace period": {
			wantCondition: "False Refused",
			wantError:     "refused: cannot be right on this node: nodeLeaseDurationSeconds 120 (renewed every 30s (a quarter of it) plus up to 4% jitter: after one failed renewal the next lands 1m2.4s later, at or beyond the node monitor grace period 50s)",
		},
		"a cluster's longer grace period": {grace: 2 * time.Minute, wantCondition: "True Trial"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.a.NodeMonitorGracePeriod = tc.grace
			e.configMap(t, "a", payload, nil)
			e.assign(t, "a")
			e.sync(t)
			diff(t, "condition", tc.wantCondition, e.condition(t))
			if st := e.status(t); !strings.HasSuffix(st.Error, tc.wantError) {
				t.Errorf("status error %q, want it to end in %q", st.Error, tc.wantError)
			}
		})
	}
}

// The status names the pin it judged, so that a waiter tells a verdict on
// the bytes pinned now from one on an earlier pin of the same ConfigMap:
// the same refusal under a new pin is reported again, and a pin that
// allows the change applies it.
func TestStatusNamesTheJudgedPin(t *testing.T) {
	e := newEnv(t)
	e.configMap(t, "a", `{`+header+`,"maxPods":110,"readOnlyPort":10255}`, nil)
	judged := func() *source.Pin {
		t.Helper()
		p, err := source.JudgedPin(e.node(t))
		must(t, err)
		return p
	}
	pinned := func() *source.Pin {
		t.Helper()
		p, err := source.PinOf(e.node(t))
		must(t, err)
		return p
	}

	e.assign(t, "a")
	e.sync(t)
	diff(t, "condition", "False Refused", e.condition(t))
	diff(t, "judged pin", pinned(), judged())

	e.assign(t, "a", "host-access") // still not the class it needs
	e.sync(t)
	diff(t, "condition", "False Refused", e.condition(t))
	diff(t, "judged pin after assigning again", pinned(), judged())

	e.assign(t, "a", "security")
	e.sync(t)
	diff(t, "condition", "True Trial", e.condition(t))
	diff(t, "judged pin once allowed", pinned(), judged())
	diff(t, "kubelet config", `{`+header+`,"maxPods":110,"readOnlyPort":10255}`, string(e.writer.Current))
}

// A ConfigMap that cannot be downloaded is a verdict on the pinned
// assignment too: its status names the pin.
func TestDownloadFailureNamesTheJudgedPin(t *testing.T) {
	e := newEnv(t)
	e.configMap(t, "a", cfgA, nil)
	e.assign(t, "a")
	must(t, e.client.CoreV1().ConfigMaps("kube-system").Delete(context.Background(), "a", metav1.DeleteOptions{}))

	e.sync(t)

	diff(t, "condition", "False Failed", e.condition(t))
	pinned, err := source.PinOf(e.node(t))
	must(t, err)
	judged, err := source.JudgedPin(e.node(t))
	must(t, err)
	if pinned == nil {
		t.Fatal("the assignment has no pin")
	}
	diff(t, "judged pin", pinned, judged)
}

// A cache may lag the ConfigMap its assigner pinned: the apiserver's watch
// cache that answers the first read of a ConfigMap, or the agent's informer
// whose event for an edit comes after the node's. A ConfigMap the cache
// does not show, or bytes that do not match the pin, are read again from
// the apiserver's storage before they are reported, and the kubelet gets
// the pinned bytes, with no failure or refusal reported.
func TestPinnedBytesReadPastAStaleCache(t *testing.T) {
	tests := map[string]struct {
		// change changes the ConfigMaps after a is last-known-good, assigns
		// one, and returns what a cache shows of it.
		change   func(t *testing.T, e *env) (*corev1.ConfigMap, error)
		assigned *corev1.NodeConfigSource
		want     string
	}{
		"bytes older than the pin": {
			change: func(t *testing.T, e *env) (*corev1.ConfigMap, error) {
				stale, err := e.getConfigMap("kube-system", "a")
				must(t, err)
				e.configMap(t, "a", cfgB, nil)
				e.assign(t, "a")
				return stale, nil
			},
			assigned: ref("a", "11"),
		},
		"a ConfigMap just created": {
			change: func(t *testing.T, e *env) (*corev1.ConfigMap, error) {
				e.configMap(t, "b", cfgB, nil)
				e.assign(t, "b")
				return nil, apierrors.NewNotFound(corev1.Resource("configmaps"), "b")
			},
			assigned: ref("b", "1"),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.onLastKnownGood(t, "a", cfgA)
			cached, cachedErr := tc.change(t, e)
			var reads []bool
			get := func(ns, name string, fresh bool) (*corev1.ConfigMap, error) {
				reads = append(reads, fresh)
				if !fresh {
					return cached, cachedErr
				}
				return e.getConfigMap(ns, name)
			}
			if _, err := e.a.sync(context.Background(), e.node(t), get); err != nil {
				t.Fatalf("sync: %v", err)
			}

			diff(t, "kubelet config", cfgB, string(e.writer.Current))
			diff(t, "status", &corev1.NodeConfigStatus{Assigned: tc.assigned, Active: tc.assigned, LastKnownGood: ref("a", "1")}, e.status(t))
			diff(t, "events", []string{"Normal Applied"}, e.events())
			diff(t, "dkc_agent_pin_mismatches_total", 0.0, testutil.ToFloat64(e.a.Metrics.PinMismatches))
			diff(t, "reads (fresh or cached)", []bool{false, true}, reads)
		})
	}
}

// What storage confirms is reported after one fresh read: bytes that do not
// match the pin are refused, and a ConfigMap it does not hold either is
// reported missing. The syncs after that read only the cache, whose informer
// shows a change of the ConfigMap.
func TestFailedReadFreshOnce(t *testing.T) {
	tests := map[string]struct {
		// change assigns what the test reads, after a is last-known-good.
		change           func(t *testing.T, e *env)
		condition, event string
	}{
		"bytes that fail the pin": {
			change:    func(t *testing.T, e *env) { e.configMap(t, "a", cfgB, nil) },
			condition: "False PinMismatch", event: "Warning PinMismatch",
		},
		"a missing ConfigMap": {
			change: func(t *testing.T, e *env) {
				src := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "b", KubeletConfigKey: "kubelet"}}
				e.assignPinned(t, src, source.NewPin(src, []byte(cfgB), nil))
			},
			condition: "False Failed", event: "Warning Failed",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.onLastKnownGood(t, "a", cfgA)
			tc.change(t, e)
			var reads []bool
			get := func(ns, name string, fresh bool) (*corev1.ConfigMap, error) {
				reads = append(reads, fresh)
				return e.getConfigMap(ns, name)
			}
			for range 2 {
				if _, err := e.a.sync(context.Background(), e.node(t), get); err != nil {
					t.Fatalf("sync: %v", err)
				}
			}
			diff(t, "kubelet config", cfgA, string(e.writer.Current))
			diff(t, "condition", tc.condition, e.condition(t))
			diff(t, "events", []string{tc.event}, e.events())
			diff(t, "reads of two syncs (fresh or cached)", []bool{false, true, false}, reads)
		})
	}
}
