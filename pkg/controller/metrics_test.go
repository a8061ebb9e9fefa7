package controller

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

func TestMetrics(t *testing.T) {
	c := &Controller{}
	if n := testutil.CollectAndCount(c.Collector()); n != 0 {
		t.Errorf("a standby reports %d series, want none", n)
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for name, state := range map[string]string{"new": "", "a": "Running", "b": "Halted", "c": "Halted", "d": "Done"} {
		u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": name, "namespace": "kube-system"}}}
		if state != "" {
			u.Object["status"] = map[string]any{"state": state}
		}
		if err := indexer.Add(u); err != nil {
			t.Fatal(err)
		}
	}
	c.indexer = indexer
	want := `# HELP dkc_controller_rollouts NodeConfigRollouts of the config namespace by status.state (a rollout no driver looked at yet counts as Running), as the leader's cache holds them; a standby reports none.
# TYPE dkc_controller_rollouts gauge
dkc_controller_rollouts{state="Aborted"} 0
dkc_controller_rollouts{state="Done"} 1
dkc_controller_rollouts{state="Halted"} 2
dkc_controller_rollouts{state="Paused"} 0
dkc_controller_rollouts{state="Running"} 2
`
	if err := testutil.CollectAndCompare(c.Collector(), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
