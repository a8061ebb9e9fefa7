package status

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dkc/dkc/pkg/kubeclient/adapt"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// annotatedNode is a node with src assigned and st reported by annotation.
func annotatedNode(t *testing.T, name string, src *corev1.NodeConfigSource, st *corev1.NodeConfigStatus) *corev1.Node {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}}
	for key, v := range map[string]any{source.AssignedAnnotation: src, source.StatusAnnotation: st} {
		if v == nil {
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		node.Annotations[key] = string(b)
	}
	return node
}

func TestWait(t *testing.T) {
	cm := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "cm", KubeletConfigKey: "kubelet"}}
	tests := map[string]struct {
		nodes    []*corev1.Node
		names    []string
		want     string
		update   *corev1.Node // applied after the first sync
		wantErr  string
		wantCode int
	}{
		"already active": {
			nodes: []*corev1.Node{annotatedNode(t, "n1", cm, &corev1.NodeConfigStatus{Assigned: cm, Active: cm})},
			names: []string{"n1"},
			want:  WaitActive,
		},
		"becomes active": {
			nodes:  []*corev1.Node{annotatedNode(t, "n1", cm, nil), annotatedNode(t, "n2", nil, nil)},
			names:  []string{"n1", "n2"},
			want:   WaitActive,
			update: annotatedNode(t, "n1", cm, &corev1.NodeConfigStatus{Assigned: cm, Active: cm}),
		},
		"reports an error": {
			nodes:    []*corev1.Node{annotatedNode(t, "n1", cm, nil)},
			names:    []string{"n1"},
			want:     WaitActive,
			update:   annotatedNode(t, "n1", cm, &corev1.NodeConfigStatus{Assigned: cm, Error: LoadError}),
			wantErr:  `node "n1": config error: ` + LoadError,
			wantCode: ExitConfigError,
		},
		"times out": {
			nodes:    []*corev1.Node{annotatedNode(t, "n1", cm, nil)},
			names:    []string{"n1", "gone"},
			want:     WaitActive,
			wantErr:  "wait for active: timed out waiting for the condition after 300ms: pending node/gone, node/n1 (no dkc agent has reported on it; see docs/install.md)",
			wantCode: ExitTimeout,
		},
		"times out, agent reported before": {
			nodes:    []*corev1.Node{annotatedNode(t, "n1", cm, &corev1.NodeConfigStatus{})},
			names:    []string{"n1"},
			want:     WaitActive,
			wantErr:  "wait for active: timed out waiting for the condition after 300ms: pending node/n1",
			wantCode: ExitTimeout,
		},
		"wait for error": {
			nodes:  []*corev1.Node{annotatedNode(t, "n1", cm, nil)},
			names:  []string{"n1"},
			want:   WaitError,
			update: annotatedNode(t, "n1", cm, &corev1.NodeConfigStatus{Assigned: cm, Error: ValidateError}),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset()
			for _, n := range tc.nodes {
				if _, err := client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			synced := make(chan struct{})
			first := true
			go func() {
				<-synced
				if tc.update != nil {
					if _, err := client.CoreV1().Nodes().Update(context.Background(), tc.update, metav1.UpdateOptions{}); err != nil {
						t.Error(err)
					}
				}
			}()
			_, err := Wait(context.Background(), adapt.Clientset(client), tc.names, tc.want, 300*time.Millisecond, func([]NodeConfig) {
				if first {
					first = false
					close(synced)
				}
			})
			if first {
				close(synced)
			}
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Errorf("Wait() error:\n got: %s\nwant: %s", got, tc.wantErr)
			}
			if code := ExitCode(err); code != tc.wantCode {
				t.Errorf("ExitCode() = %d, want %d", code, tc.wantCode)
			}
		})
	}
}

func TestWatchReportsOnlyChanges(t *testing.T) {
	cm := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "cm", KubeletConfigKey: "kubelet"}}
	client := fake.NewClientset(annotatedNode(t, "n1", nil, nil), annotatedNode(t, "n2", nil, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var calls [][]string
	err := Watch(ctx, adapt.Clientset(client), Scope{Names: []string{"n1"}}, func(changed, all []NodeConfig) (bool, error) {
		var names []string
		for _, item := range changed {
			names = append(names, item.Name)
		}
		calls = append(calls, names)
		switch len(calls) {
		case 1:
			go func() {
				// A heartbeat-like change, a change of another node, then a
				// real change.
				n1 := annotatedNode(t, "n1", nil, nil)
				n1.Labels = map[string]string{"beat": "1"}
				n2 := annotatedNode(t, "n2", cm, nil)
				for _, n := range []*corev1.Node{n1, n2, annotatedNode(t, "n1", cm, nil)} {
					if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
						t.Error(err)
					}
				}
			}()
		case 2:
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]string{{"n1"}, {"n1"}}, calls); diff != "" {
		t.Errorf("changed nodes per call (-want +got):\n%s", diff)
	}
}

func TestWatchEndsWithContext(t *testing.T) {
	client := fake.NewClientset(annotatedNode(t, "n1", nil, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := Watch(ctx, adapt.Clientset(client), Scope{}, func(changed, all []NodeConfig) (bool, error) { return false, nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Watch() = %v, want context.DeadlineExceeded", err)
	}
}
