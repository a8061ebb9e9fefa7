package util

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// configzServer serves each node's /configz, as the apiserver's node proxy
// does, from configs (the kubeletconfig object's JSON by node name); other
// nodes answer 503. It lists the pods bound to a node (a spec.nodeName
// field selector) from pods, and forbids that list for a node pods lacks.
func configzServer(t *testing.T, configs map[string]string, pods map[string][]corev1.Pod) kubernetes.Interface {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/pods" {
			bound, ok := pods[strings.TrimPrefix(r.URL.Query().Get("fieldSelector"), "spec.nodeName=")]
			if !ok {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusForbidden)
				_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods is forbidden","reason":"Forbidden","code":403}`))
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(&corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: bound})
			return
		}
		name, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/api/v1/nodes/"), "/proxy/configz")
		cfg, known := configs[name]
		if !ok || !known {
			http.Error(w, "Error trying to reach service: dial tcp: connection refused", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kubeletconfig":` + cfg + `}`))
	}))
	t.Cleanup(srv.Close)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// ReportOptIns compares the config with what each node's kubelet runs and
// names, per node, only the classes that change there and the exact
// --allow-unsafe they need.
func TestReportOptIns(t *testing.T) {
	const own = `{"staticPodPath":"/etc/kubernetes/manifests","clusterDNS":["10.96.0.10"],"maxPods":110}`
	const other = `{"staticPodPath":"/srv/pods","clusterDNS":["10.96.0.10"],"maxPods":110}`
	snapshot := []byte("kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\n" +
		"staticPodPath: /etc/kubernetes/manifests\nclusterDNS: [10.96.0.10]\nmaxPods: 50\n")
	nodes := func(names ...string) []corev1.Node {
		out := make([]corev1.Node, len(names))
		for i, n := range names {
			out[i] = corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}
		}
		return out
	}
	declaring := func(names ...string) []corev1.Node {
		out := nodes(names...)
		for i := range out {
			out[i].Status.DeclaredFeatures = []string{"ExtendWebSocketsToKubelet", "RestartAllContainersOnContainerExits"}
		}
		return out
	}
	gateOff := []byte("kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\n" +
		"featureGates:\n  RestartAllContainersOnContainerExits: false\n")
	never := corev1.ContainerRestartPolicyNever
	restartAll := func(name string, phase corev1.PodPhase) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: corev1.PodSpec{NodeName: "own", Containers: []corev1.Container{{Name: "c", RestartPolicy: &never,
				RestartPolicyRules: []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestartAllContainers,
					ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}}}},
			Status: corev1.PodStatus{Phase: phase}}
	}
	tests := map[string]struct {
		nodes   []corev1.Node
		allow   []string
		payload []byte
		want    string
	}{
		"a snapshot back on its own node": {
			nodes: nodes("own"),
			want:  "node/own needs no --allow-unsafe: the config changes no field of a class that needs one\n",
		},
		"a node with another static pod path": {
			nodes: nodes("own", "other"),
			want: "node/own needs no --allow-unsafe: the config changes no field of a class that needs one\n" +
				`Warning: node/other needs --allow-unsafe=host-access, or its agent refuses the config (no --allow-unsafe given): it changes staticPodPath "/srv/pods" -> "/etc/kubernetes/manifests" (host-access)` + "\n",
		},
		"allowed, and a class too many": {
			nodes: nodes("other"),
			allow: []string{"host-access", "redirect"},
			want: `node/other needs --allow-unsafe=host-access: it changes staticPodPath "/srv/pods" -> "/etc/kubernetes/manifests" (host-access)` + "\n" +
				"Warning: --allow-unsafe allows redirect, which the config changes on none of these nodes: leave it out\n",
		},
		"a node that does not answer": {
			nodes: nodes("gone"),
			allow: []string{"redirect"},
			want:  "Warning: node/gone: what the config changes there is not known: get /api/v1/nodes/gone/proxy/configz: ",
		},
		// The pods that rely on the feature are named where the caller
		// may list them; a terminal pod is not.
		"a gate that takes away a feature the node declares": {
			nodes:   declaring("own", "secret"),
			allow:   []string{"host-access"},
			payload: gateOff,
			want: `Warning: node/own needs --allow-unsafe=host-access,declared-features, or its agent refuses the config (given --allow-unsafe=host-access): it changes ` +
				`featureGates["RestartAllContainersOnContainerExits"] "" -> "false" (host-access), ` +
				`declaredFeatures "RestartAllContainersOnContainerExits" -> "" (declared-features; relied on by running pods default/restart-all)` + "\n" +
				"Warning: node/secret: the running pods that rely on the declared features the config takes away are not known: pods is forbidden\n" +
				`Warning: node/secret needs --allow-unsafe=host-access,declared-features, or its agent refuses the config (given --allow-unsafe=host-access): it changes ` +
				`featureGates["RestartAllContainersOnContainerExits"] "" -> "false" (host-access), ` +
				`declaredFeatures "RestartAllContainersOnContainerExits" -> "" (declared-features)` + "\n",
		},
		"a payload that does not decode": {
			nodes:   nodes("own"),
			payload: []byte("maxPods: 50\n"),
		},
	}
	client := configzServer(t, map[string]string{"own": own, "other": other, "secret": own},
		map[string][]corev1.Pod{"own": {restartAll("restart-all", corev1.PodPending), restartAll("done", corev1.PodSucceeded)}})
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			payload := tc.payload
			if payload == nil {
				payload = snapshot
			}
			var out strings.Builder
			ReportOptIns(t.Context(), client, tc.nodes, payload, tc.allow, &out)
			got := out.String()
			if strings.HasSuffix(tc.want, ": ") {
				// The error text after it is client-go's.
				if !strings.HasPrefix(got, tc.want) || strings.Contains(got, "--allow-unsafe allows") {
					t.Errorf("got %q, want it to start with %q and name no unused class", got, tc.want)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
