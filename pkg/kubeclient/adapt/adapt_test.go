package adapt

import (
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/watchlist"
)

// TestWatchListSemantics: informers on an adapted fake must list and then
// watch, as on the fake itself (its watch never sends the bookmark that ends
// a watch list, so an informer would never sync); on a real clientset they
// stream the list.
func TestWatchListSemantics(t *testing.T) {
	clientset, err := kubernetes.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		cs   kubernetes.Interface
		want bool
	}{
		"fake":      {cs: fake.NewClientset(), want: true},
		"clientset": {cs: clientset, want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := watchlist.DoesClientNotSupportWatchListSemantics(Clientset(tc.cs)); got != tc.want {
				t.Errorf("watch list unsupported = %v, want %v", got, tc.want)
			}
		})
	}
}
