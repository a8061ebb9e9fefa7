package cmd_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// fakeAPIServer serves nodes and configmaps read-only, as an apiserver
// does for the requests of the commands that only read: a get, a list (by
// label selector; field selectors are ignored), and a watch that sends
// nothing until the client hangs up. A watch that asks for its initial events (client-go's watch
// list) is refused, so that informers fall back to a list. Anything else
// is a 405, which fails the command: the cases that use it must not write.
type fakeAPIServer struct {
	Nodes      []corev1.Node
	ConfigMaps []corev1.ConfigMap
	// Rollouts are NodeConfigRollouts, with their kind and apiVersion.
	Rollouts []unstructured.Unstructured
}

// start serves s until the test ends, and returns a kubeconfig for it.
func (s *fakeAPIServer) start(t *testing.T) (kubeconfig string) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/nodes", func(w http.ResponseWriter, r *http.Request) {
		var items []any
		for i := range s.Nodes {
			if selected(r, s.Nodes[i].Labels) {
				items = append(items, typed(&s.Nodes[i], "Node"))
			}
		}
		serveList(w, r, "NodeList", items)
	})
	mux.HandleFunc("GET /api/v1/nodes/{name}", func(w http.ResponseWriter, r *http.Request) {
		for i := range s.Nodes {
			if s.Nodes[i].Name == r.PathValue("name") {
				serveJSON(w, http.StatusOK, typed(&s.Nodes[i], "Node"))
				return
			}
		}
		notFound(w, "nodes", r.PathValue("name"))
	})
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/configmaps", func(w http.ResponseWriter, r *http.Request) {
		var items []any
		for i := range s.ConfigMaps {
			if s.ConfigMaps[i].Namespace == r.PathValue("ns") && selected(r, s.ConfigMaps[i].Labels) {
				items = append(items, typed(&s.ConfigMaps[i], "ConfigMap"))
			}
		}
		serveList(w, r, "ConfigMapList", items)
	})
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/configmaps/{name}", func(w http.ResponseWriter, r *http.Request) {
		for i := range s.ConfigMaps {
			if cm := &s.ConfigMaps[i]; cm.Namespace == r.PathValue("ns") && cm.Name == r.PathValue("name") {
				serveJSON(w, http.StatusOK, typed(cm, "ConfigMap"))
				return
			}
		}
		notFound(w, "configmaps", r.PathValue("name"))
	})
	mux.HandleFunc("GET /apis/kubectl-dkc.io/v1alpha1/namespaces/{ns}/nodeconfigrollouts", func(w http.ResponseWriter, r *http.Request) {
		var items []any
		for i := range s.Rollouts {
			if s.Rollouts[i].GetNamespace() == r.PathValue("ns") {
				items = append(items, s.Rollouts[i].Object)
			}
		}
		serveList(w, r, "NodeConfigRolloutList", items)
	})
	mux.HandleFunc("GET /apis/kubectl-dkc.io/v1alpha1/namespaces/{ns}/nodeconfigrollouts/{name}", func(w http.ResponseWriter, r *http.Request) {
		for i := range s.Rollouts {
			if ro := &s.Rollouts[i]; ro.GetNamespace() == r.PathValue("ns") && ro.GetName() == r.PathValue("name") {
				serveJSON(w, http.StatusOK, ro.Object)
				return
			}
		}
		notFound(w, "nodeconfigrollouts", r.PathValue("name"))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		serveStatus(w, http.StatusMethodNotAllowed, "MethodNotAllowed", fmt.Sprintf("the fake apiserver does not serve %s %s", r.Method, r.URL.Path))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: %s
contexts:
- name: fake
  context:
    cluster: fake
current-context: fake
`, srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// selected reports whether the request's label selector selects an
// object with labels l.
func selected(r *http.Request, l map[string]string) bool {
	sel, err := labels.Parse(r.URL.Query().Get("labelSelector"))
	return err == nil && sel.Matches(labels.Set(l))
}

// typed returns obj as JSON with its kind and apiVersion v1 set.
func typed(obj any, kind string) any {
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		panic(err)
	}
	m["kind"], m["apiVersion"] = kind, "v1"
	return m
}

// serveList serves items as a list of kind, or a watch.
func serveList(w http.ResponseWriter, r *http.Request, kind string, items []any) {
	q := r.URL.Query()
	switch {
	case q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true":
		serveStatus(w, http.StatusBadRequest, "BadRequest", "the fake apiserver has no watch list")
	case q.Get("watch") == "true":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	default:
		if items == nil {
			items = []any{}
		}
		serveJSON(w, http.StatusOK, map[string]any{
			"kind": kind, "apiVersion": "v1",
			"metadata": metav1.ListMeta{ResourceVersion: "1"},
			"items":    items,
		})
	}
}

// notFound answers as an apiserver does for a missing object: a 404 that
// names it.
func notFound(w http.ResponseWriter, resource, name string) {
	serveJSON(w, http.StatusNotFound, metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound,
		Message: fmt.Sprintf("%s %q not found", resource, name),
		Details: &metav1.StatusDetails{Name: name, Kind: resource},
	})
}

func serveStatus(w http.ResponseWriter, code int, reason, message string) {
	serveJSON(w, code, metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Reason: metav1.StatusReason(reason), Message: message, Code: int32(code),
	})
}

func serveJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
