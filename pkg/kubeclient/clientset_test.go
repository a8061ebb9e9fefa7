package kubeclient

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/reference"
)

// request is what the apiserver stand-in saw of one request.
type request struct {
	Method, Path, Query, ContentType, Body string
	// Protobuf is true when the request asked for protobuf first, as
	// client-go's clientset does for these types.
	Protobuf bool
}

// TestClientset checks the requests each client sends: method, path (API
// group, namespace, subresource), query and body, over HTTP to a stand-in
// that answers with JSON.
func TestClientset(t *testing.T) {
	node := `{"kind":"Node","apiVersion":"v1","metadata":{"name":"n1"}}`
	tests := map[string]struct {
		call     func(ctx context.Context, c *Clientset) (string, error)
		response string
		want     request
	}{
		"get node": {
			call: func(ctx context.Context, c *Clientset) (string, error) {
				n, err := c.Nodes().Get(ctx, "n1", metav1.GetOptions{})
				return n.Name, err
			},
			response: node,
			want:     request{Method: "GET", Path: "/api/v1/nodes/n1", Protobuf: true},
		},
		"list nodes by name": {
			call: func(ctx context.Context, c *Clientset) (string, error) {
				l, err := c.Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=n1"})
				return l.Items[0].Name, err
			},
			response: `{"kind":"NodeList","apiVersion":"v1","metadata":{},"items":[` + node + `]}`,
			want:     request{Method: "GET", Path: "/api/v1/nodes", Query: "fieldSelector=metadata.name%3Dn1", Protobuf: true},
		},
		"watch nodes by name": {
			call: func(ctx context.Context, c *Clientset) (string, error) {
				w, err := c.Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=n1", ResourceVersion: "7"})
				if err != nil {
					return "", err
				}
				defer w.Stop()
				e := <-w.ResultChan()
				if e.Type != watch.Added {
					return "", fmt.Errorf("event %s %#v, want ADDED", e.Type, e.Object)
				}
				return e.Object.(*corev1.Node).Name, nil
			},
			response: `{"type":"ADDED","object":` + node + `}`,
			want:     request{Method: "GET", Path: "/api/v1/nodes", Query: "fieldSelector=metadata.name%3Dn1&resourceVersion=7&watch=true", Protobuf: true},
		},
		"patch node status": {
			call: func(ctx context.Context, c *Clientset) (string, error) {
				n, err := c.Nodes().Patch(ctx, "n1", types.MergePatchType, []byte(`{"status":{}}`),
					metav1.PatchOptions{FieldManager: "dkc"}, "status")
				return n.Name, err
			},
			response: node,
			want: request{Method: "PATCH", Path: "/api/v1/nodes/n1/status", Query: "fieldManager=dkc",
				ContentType: "application/merge-patch+json", Body: `{"status":{}}`, Protobuf: true},
		},
		"dry-run patch of a node": {
			call: func(ctx context.Context, c *Clientset) (string, error) {
				n, err := c.Nodes().Patch(ctx, "n1", types.MergePatchType, []byte(`{}`),
					metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
				return n.Name, err
			},
			response: node,
			want: request{Method: "PATCH", Path: "/api/v1/nodes/n1", Query: "dryRun=All",
				ContentType: "application/merge-patch+json", Body: `{}`, Protobuf: true},
		},
		"list ConfigMaps in a namespace": {
			call: func(ctx context.Context, c *Clientset) (string, error) {
				l, err := c.ConfigMaps("kube-system").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=cfg"})
				return l.Items[0].Name, err
			},
			response: `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{},"items":[{"metadata":{"name":"cfg","namespace":"kube-system"}}]}`,
			want:     request{Method: "GET", Path: "/api/v1/namespaces/kube-system/configmaps", Query: "fieldSelector=metadata.name%3Dcfg", Protobuf: true},
		},
		"get a Lease": {
			call: func(ctx context.Context, c *Clientset) (string, error) {
				l, err := c.Leases("kube-node-lease").Get(ctx, "n1", metav1.GetOptions{})
				return l.Name, err
			},
			response: `{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":"n1","namespace":"kube-node-lease"}}`,
			want:     request{Method: "GET", Path: "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", Protobuf: true},
		},
		"create an Event in its namespace": {
			call: func(_ context.Context, c *Clientset) (string, error) {
				e, err := EventSink{Client: c}.Create(&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "n1.1", Namespace: "default"}})
				return e.Name, err
			},
			response: `{"kind":"Event","apiVersion":"v1","metadata":{"name":"n1.1","namespace":"default"}}`,
			want:     request{Method: "POST", Path: "/api/v1/namespaces/default/events", ContentType: "application/vnd.kubernetes.protobuf", Protobuf: true},
		},
		"patch an Event": {
			call: func(_ context.Context, c *Clientset) (string, error) {
				e, err := EventSink{Client: c}.Patch(&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "n1.1", Namespace: "default"}}, []byte(`{"count":2}`))
				return e.Name, err
			},
			response: `{"kind":"Event","apiVersion":"v1","metadata":{"name":"n1.1","namespace":"default"}}`,
			want: request{Method: "PATCH", Path: "/api/v1/namespaces/default/events/n1.1",
				ContentType: "application/strategic-merge-patch+json", Body: `{"count":2}`, Protobuf: true},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var (
				mu  sync.Mutex
				got []request
			)
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				req := request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, ContentType: r.Header.Get("Content-Type"),
					Protobuf: r.Header.Get("Accept") == "application/vnd.kubernetes.protobuf,application/json"}
				if req.ContentType != "application/vnd.kubernetes.protobuf" { // else binary
					req.Body = string(body)
				}
				mu.Lock()
				got = append(got, req)
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, tc.response)
			}))
			defer s.Close()
			c, err := NewForConfig(&rest.Config{Host: s.URL, QPS: -1})
			if err != nil {
				t.Fatal(err)
			}
			name, err := tc.call(context.Background(), c)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if name == "" {
				t.Errorf("call returned an object without a name: the response was not decoded")
			}
			if diff := cmp.Diff([]request{tc.want}, got); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSchemeRefersToNode: an event recorder made with Scheme finds the
// Node's kind, else it drops every Event about the Node.
func TestSchemeRefersToNode(t *testing.T) {
	ref, err := reference.GetReference(Scheme, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1"}})
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: "n1", UID: "u1"}
	if diff := cmp.Diff(want, ref); diff != "" {
		t.Errorf("reference (-want +got):\n%s", diff)
	}
}
