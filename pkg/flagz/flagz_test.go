package flagz

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestParse(t *testing.T) {
	tests := map[string]struct {
		raw     string
		want    map[string]string
		wantErr error
	}{
		"v1beta1": {
			raw:  `{"kind":"Flagz","apiVersion":"config.k8s.io/v1beta1","metadata":{"name":"kubelet"},"flags":{"max-pods":"50","config":"/var/lib/kubelet/config.yaml"}}`,
			want: map[string]string{"max-pods": "50", "config": "/var/lib/kubelet/config.yaml"},
		},
		"the text form": {
			raw:     "\nkubelet flagz\nWarning: This endpoint is not meant to be machine parseable\n\nmax-pods=50\n",
			wantErr: ErrNotServed,
		},
		"another kind": {raw: `{"kind":"Status"}`, wantErr: ErrNotServed},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Parse([]byte(tc.raw))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestShadowError(t *testing.T) {
	err := &ShadowError{Nodes: map[string][]Shadow{
		"b": {{Field: "maxPods", Flag: "max-pods", Value: "50"}},
		"a": {{Field: "maxPods", Flag: "max-pods", Value: "60"}, {Field: "cgroupDriver", Flag: "cgroup-driver", Value: "systemd"}},
	}}
	want := `the config changes fields that a kubelet flag sets, and a flag always wins over a config: ` +
		`node "a": maxPods (set by --max-pods=60), cgroupDriver (set by --cgroup-driver=systemd); node "b": maxPods (set by --max-pods=50): ` +
		`remove the flag from the kubelet's command line (kubeadm: KUBELET_EXTRA_ARGS, kubeletExtraArgs), or leave the field out of the config`
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestCheckNodes reads each node's /flagz through the apiserver's node
// proxy, asking for the structured form, and refuses only where a flag
// sets a field the config changes; a kubelet without /flagz is left out.
func TestCheckNodes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Accept"), "application/json;as=Flagz;v=v1beta1;g=config.k8s.io") {
			t.Errorf("%s: Accept %q, want the structured Flagz", r.URL.Path, r.Header.Get("Accept"))
		}
		switch r.URL.Path {
		case "/api/v1/nodes/flagged/proxy/flagz":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"kind":"Flagz","apiVersion":"config.k8s.io/v1beta1","flags":{"max-pods":"42","cgroup-driver":"cgroupfs"}}`)
		case "/api/v1/nodes/plain/proxy/flagz":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"kind":"Flagz","apiVersion":"config.k8s.io/v1beta1","flags":{"max-pods":"110"}}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	clientset, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	client := clientset.CoreV1().RESTClient()
	nodes := []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "flagged"}}, {ObjectMeta: metav1.ObjectMeta{Name: "plain"}}, {ObjectMeta: metav1.ObjectMeta{Name: "old"}}}
	err = CheckNodes(context.Background(), client, nodes, []byte("kind: KubeletConfiguration\nmaxPods: 50\n"))
	var shadow *ShadowError
	if !errors.As(err, &shadow) {
		t.Fatalf("err %v, want a ShadowError", err)
	}
	if diff := cmp.Diff(map[string][]Shadow{"flagged": {{Field: "maxPods", Flag: "max-pods", Value: "42"}}}, shadow.Nodes); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := CheckNodes(context.Background(), client, nodes, []byte("kind: KubeletConfiguration\nmaxPods: 42\n")); err != nil {
		t.Errorf("the flag's own value: %v, want no refusal", err)
	}
	if _, err := Read(context.Background(), client, "old"); !errors.Is(err, ErrNotServed) {
		t.Errorf("a kubelet without /flagz: %v, want ErrNotServed", err)
	}
}

// TestCheckNodesFromAnnotations: a node whose agent recorded its flags
// (Annotation) is judged by the record, without a read of its kubelet; a
// node without a record, or with one that does not decode, is read.
func TestCheckNodesFromAnnotations(t *testing.T) {
	var mu sync.Mutex
	var read []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		read = append(read, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"Flagz","apiVersion":"config.k8s.io/v1beta1","flags":{"max-pods":"43"}}`)
	}))
	defer srv.Close()
	clientset, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	client := clientset.CoreV1().RESTClient()
	node := func(name string, annotation ...string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if len(annotation) > 0 {
			n.Annotations = map[string]string{Annotation: annotation[0]}
		}
		return n
	}
	nodes := []corev1.Node{
		node("recorded", Encode([]Shadow{{Field: "maxPods", Flag: "max-pods", Value: "42"}})),
		node("recorded-none", Encode(nil)),
		node("unrecorded"),
		node("garbled", "{"),
	}
	err = CheckNodes(context.Background(), client, nodes, []byte("kind: KubeletConfiguration\nmaxPods: 50\n"))
	var shadow *ShadowError
	if !errors.As(err, &shadow) {
		t.Fatalf("err %v, want a ShadowError", err)
	}
	want := map[string][]Shadow{
		"recorded":   {{Field: "maxPods", Flag: "max-pods", Value: "42"}},
		"unrecorded": {{Field: "maxPods", Flag: "max-pods", Value: "43"}},
		"garbled":    {{Field: "maxPods", Flag: "max-pods", Value: "43"}},
	}
	if diff := cmp.Diff(want, shadow.Nodes); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	sort.Strings(read)
	if diff := cmp.Diff([]string{"/api/v1/nodes/garbled/proxy/flagz", "/api/v1/nodes/unrecorded/proxy/flagz"}, read); diff != "" {
		t.Errorf("kubelets read (-want +got):\n%s", diff)
	}
	if v := Encode(nil); v != "[]" {
		t.Errorf("Encode(nil) = %q, want []", v)
	}
}
