package status

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/kubectl-dkc/dkc/pkg/goldenfile"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/pkg/table"
)

var update = flag.Bool("update", false, "update the golden files in testdata/")

// golden compares got with testdata/name, or writes it there with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	goldenfile.Check(t, filepath.Join("testdata", name), got, *update, "go test -update")
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// cm is an assignment of ConfigMap kube-system/name.
func cm(name string) *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: source.DefaultNamespace, Name: name, KubeletConfigKey: source.DefaultKey,
	}}
}

// ckpt is cm(name) as a status reports it, with uid and resourceVersion.
func ckpt(name, rv string) *corev1.NodeConfigSource {
	src := cm(name)
	src.ConfigMap.UID = types.UID("uid-" + name)
	src.ConfigMap.ResourceVersion = rv
	return src
}

// item builds a NodeConfig, valid by default: node n1 with nothing assigned
// and nothing reported.
type item struct{ NodeConfig }

func newItem(name string) *item {
	return &item{NodeConfig{
		TypeMeta:   metav1.TypeMeta{Kind: Kind, APIVersion: SchemeGroupVersion.String()},
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}}
}

func (i *item) carrier(c source.Carrier) *item { i.Carrier = c; return i }
func (i *item) requested(src *corev1.NodeConfigSource) *item {
	i.ConfigSource = src
	return i
}
func (i *item) agent(a AgentState) *item { i.Agent = a; return i }
func (i *item) pin(p *source.Pin) *item  { i.Pin = p; return i }
func (i *item) judged(p *source.Pin) *item {
	i.JudgedPin = p
	return i
}
func (i *item) status(assigned, active, lkg *corev1.NodeConfigSource, errText string) *item {
	i.Status = &corev1.NodeConfigStatus{Assigned: assigned, Active: active, LastKnownGood: lkg, Error: errText}
	return i
}

func TestAllNilSubfieldsErrorVerbatim(t *testing.T) {
	const upstream = "invalid NodeConfigSource, exactly one subfield must be non-nil, but all were nil"
	if AllNilSubfieldsError != upstream {
		t.Errorf("got %q, want upstream's %q", AllNilSubfieldsError, upstream)
	}
}

func TestFromNode(t *testing.T) {
	const statusJSON = `{"assigned":{"configMap":{"namespace":"kube-system","name":"b","uid":"uid-b","resourceVersion":"2","kubeletConfigKey":"kubelet"}},"error":"failed to validate config, see Kubelet log for details"}`
	tests := map[string]struct {
		node    *corev1.Node
		want    NodeConfig
		wantErr string
	}{
		"nothing": {
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"a": "b"}}},
			want: newItem("n1").agent(AgentNone).NodeConfig,
		},
		"native": {
			node: &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "n1"},
				Spec:       corev1.NodeSpec{ConfigSource: cm("a")},
				Status:     corev1.NodeStatus{Config: &corev1.NodeConfigStatus{Assigned: ckpt("a", "1"), Active: ckpt("a", "1")}},
			},
			want: newItem("n1").carrier(source.Native).requested(cm("a")).status(ckpt("a", "1"), ckpt("a", "1"), nil, "").agent(AgentReady).NodeConfig,
		},
		"annotation": {
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{
				source.AssignedAnnotation: `{"configMap":{"namespace":"kube-system","name":"b","kubeletConfigKey":"kubelet"}}`,
				source.StatusAnnotation:   statusJSON,
			}}},
			want: newItem("n1").carrier(source.Annotation).requested(cm("b")).status(ckpt("b", "2"), nil, nil, ValidateError).agent(AgentReady).NodeConfig,
		},
		"status only": {
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{source.StatusAnnotation: `{}`}}},
			want: newItem("n1").carrier(source.Annotation).status(nil, nil, nil, "").agent(AgentReady).NodeConfig,
		},
		"invalid assignment": {
			node:    &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{source.AssignedAnnotation: `{`}}},
			want:    newItem("n1").NodeConfig,
			wantErr: `node "n1": annotation kubectl-dkc.io/config-source: invalid JSON: unexpected end of JSON input`,
		},
		"invalid status": {
			node:    &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{source.StatusAnnotation: `[]`}}},
			want:    newItem("n1").NodeConfig,
			wantErr: `node "n1": annotation kubectl-dkc.io/config-status: invalid JSON: json: cannot unmarshal array into Go value of type v1.NodeConfigStatus`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := FromNode(tc.node)
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("item (-want +got):\n%s", diff)
			}
		})
	}
}

// fleet is one item of every kind, unsorted.
func fleet() []NodeConfig {
	otherKey := cm("c")
	otherKey.ConfigMap.KubeletConfigKey = "kubelet.yaml"
	return []NodeConfig{
		newItem("node-c-failed").carrier(source.Annotation).requested(cm("bad-k7t9m2")).
			status(ckpt("bad-k7t9m2", "812"), ckpt("good-5f8h4c", "700"), ckpt("good-5f8h4c", "700"), ValidateError).agent(AgentReady).NodeConfig,
		newItem("node-a-active").carrier(source.Native).requested(cm("good-5f8h4c")).pin(source.NewPin(cm("good-5f8h4c"), []byte("good"), []string{"security"})).
			status(ckpt("good-5f8h4c", "700"), ckpt("good-5f8h4c", "700"), ckpt("good-5f8h4c", "700"), "").agent(AgentReady).NodeConfig,
		newItem("node-b-pending").carrier(source.Annotation).requested(cm("good-5f8h4c")).pin(source.NewPin(cm("good-5f8h4c"), []byte("good"), nil)).
			status(nil, nil, nil, "").agent(AgentStale).NodeConfig,
		newItem("node-d-unreported").agent(AgentNone).NodeConfig,
		newItem("node-e-odd").carrier(source.Annotation).requested(otherKey).
			status(&corev1.NodeConfigSource{}, nil, nil, SyncErrorPrefix+AllNilSubfieldsError+"\nsecond\tline").NodeConfig,
	}
}

func TestTable(t *testing.T) {
	tests := map[string]struct {
		items []NodeConfig
		wide  bool
	}{
		"table.txt":      {items: fleet()},
		"table-wide.txt": {items: fleet(), wide: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := fmt.Sprint(tc.items)
			var buf bytes.Buffer
			if err := table.Print(&buf, Table(tc.items, tc.wide)); err != nil {
				t.Fatal(err)
			}
			golden(t, name, buf.Bytes())
			if after := fmt.Sprint(tc.items); after != before {
				t.Error("Table reordered its input")
			}
		})
	}
}

// TestPrinters checks that the objects print through kubectl's -o printers.
func TestPrinters(t *testing.T) {
	list := NewList(fleet()[:3])
	tests := map[string]printers.ResourcePrinter{
		"list.json": &printers.JSONPrinter{},
		"list.yaml": &printers.YAMLPrinter{},
	}
	for name, p := range tests {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := p.PrintObj(list, &buf); err != nil {
				t.Fatal(err)
			}
			golden(t, name, buf.Bytes())
		})
	}
	t.Run("jsonpath", func(t *testing.T) {
		p, err := printers.NewJSONPathPrinter(`{range .items[*]}{.metadata.name}={.status.active.configMap.name}{"\n"}{end}`)
		if err != nil {
			t.Fatal(err)
		}
		p.AllowMissingKeys(true)
		var buf bytes.Buffer
		if err := p.PrintObj(list, &buf); err != nil {
			t.Fatal(err)
		}
		want := "node-a-active=good-5f8h4c\nnode-b-pending=\nnode-c-failed=good-5f8h4c\n"
		if diff := cmp.Diff(want, buf.String()); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("item", func(t *testing.T) {
		var buf bytes.Buffer
		if err := (&printers.JSONPrinter{}).PrintObj(&list.Items[0], &buf); err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(buf.Bytes(), []byte(`"kind": "NodeConfig"`)) {
			t.Errorf("no kind in:\n%s", buf.String())
		}
	})
}

// An empty list prints "items": [], as kubectl get -o json does for no
// objects, so that a script's jq '.items[]' finds nothing instead of
// failing on null.
func TestEmptyListJSON(t *testing.T) {
	var buf bytes.Buffer
	if err := (&printers.JSONPrinter{}).PrintObj(NewList(nil), &buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(buf.Bytes(), []byte(`"items": []`)) {
		t.Errorf("an empty list prints:\n%s\nwant \"items\": []", buf.String())
	}
}

func TestDeepCopy(t *testing.T) {
	list := NewList(fleet())
	cp := list.DeepCopyObject().(*NodeConfigList)
	if diff := cmp.Diff(list, cp); diff != "" {
		t.Fatalf("copy differs (-orig +copy):\n%s", diff)
	}
	cp.Items[0].Status.Active.ConfigMap.Name = "changed"
	cp.Items[0].ConfigSource.ConfigMap.Name = "changed"
	cp.Items[0].Name = "changed"
	if diff := cmp.Diff(NewList(fleet()), list); diff != "" {
		t.Errorf("original changed through copy (-want +got):\n%s", diff)
	}
}

func TestReached(t *testing.T) {
	failedErr := `node "n1": config error: ` + ValidateError
	tests := map[string]struct {
		item     *item
		want     string
		wantDone bool
		wantErr  string
	}{
		"active: done": {
			item: newItem("n1").requested(cm("a")).status(ckpt("a", "1"), ckpt("a", "1"), ckpt("a", "1"), ""),
			want: WaitActive, wantDone: true,
		},
		"active: the health gate still runs": {
			item: newItem("n1").requested(cm("a")).status(ckpt("a", "1"), ckpt("a", "1"), nil, "").agent(AgentVerifying),
			want: WaitActive,
		},
		"active: still the old config": {
			item: newItem("n1").requested(cm("b")).status(ckpt("a", "1"), ckpt("a", "1"), nil, ""),
			want: WaitActive,
		},
		"active: assigned but not active yet": {
			item: newItem("n1").requested(cm("b")).status(ckpt("b", "2"), ckpt("a", "1"), nil, ""),
			want: WaitActive,
		},
		"active: other key": {
			item: newItem("n1").requested(&corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "a", KubeletConfigKey: "other"}}).
				status(ckpt("a", "1"), ckpt("a", "1"), nil, ""),
			want: WaitActive,
		},
		"active: error for the request": {
			item: newItem("n1").requested(cm("b")).status(ckpt("b", "2"), ckpt("a", "1"), ckpt("a", "1"), ValidateError),
			want: WaitActive, wantErr: failedErr,
		},
		"active: error on the bytes pinned before, assigned again": {
			item: newItem("n1").requested(cm("b")).pin(source.NewPin(cm("b"), []byte("new"), nil)).judged(source.NewPin(cm("b"), []byte("old"), nil)).
				status(ckpt("b", "2"), ckpt("a", "1"), ckpt("a", "1"), ValidateError),
			want: WaitActive,
		},
		"active: error on the pinned bytes": {
			item: newItem("n1").requested(cm("b")).pin(source.NewPin(cm("b"), []byte("new"), nil)).judged(source.NewPin(cm("b"), []byte("new"), nil)).
				status(ckpt("b", "2"), ckpt("a", "1"), ckpt("a", "1"), ValidateError),
			want: WaitActive, wantErr: failedErr,
		},
		"active: active under the classes allowed before, allowed again with more": {
			item: newItem("n1").requested(cm("b")).pin(source.NewPin(cm("b"), []byte("new"), []string{"security"})).judged(source.NewPin(cm("b"), []byte("new"), nil)).
				status(ckpt("b", "2"), ckpt("b", "2"), ckpt("a", "1"), ""),
			want: WaitActive,
		},
		"active: stale error for an older request": {
			item: newItem("n1").requested(cm("c")).status(ckpt("b", "2"), ckpt("a", "1"), ckpt("a", "1"), ValidateError),
			want: WaitActive,
		},
		"active: no status yet": {
			item: newItem("n1").requested(cm("a")),
			want: WaitActive,
		},
		"active: local, no status": {
			item: newItem("n1"),
			want: WaitActive, wantDone: true,
		},
		"active: local reported": {
			item: newItem("n1").status(nil, nil, nil, ""),
			want: WaitActive, wantDone: true,
		},
		"active: back to local pending": {
			item: newItem("n1").status(ckpt("a", "1"), ckpt("a", "1"), nil, ""),
			want: WaitActive,
		},
		"error: present": {
			item: newItem("n1").requested(cm("b")).status(ckpt("b", "2"), ckpt("a", "1"), nil, ValidateError),
			want: WaitError, wantDone: true,
		},
		"error: absent": {
			item: newItem("n1").requested(cm("a")).status(ckpt("a", "1"), ckpt("a", "1"), nil, ""),
			want: WaitError,
		},
		"error: no status": {
			item: newItem("n1"),
			want: WaitError,
		},
		"unknown condition": {
			item: newItem("n1"), want: "ready",
			wantErr: `invalid --wait-for "ready": must be "active" or "error"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			done, err := Reached(tc.item.NodeConfig, tc.want)
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if done != tc.wantDone {
				t.Errorf("done: got %v, want %v", done, tc.wantDone)
			}
			if err != nil && tc.want == WaitActive && !errors.Is(err, ErrConfigError) {
				t.Errorf("error %v does not match ErrConfigError", err)
			}
		})
	}
}

func TestReachedAll(t *testing.T) {
	pending, err := ReachedAll(fleet(), WaitActive)
	if diff := cmp.Diff([]string{"node-b-pending", "node-e-odd"}, pending); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
	wantErr := `node "node-c-failed": config error: ` + ValidateError
	if diff := cmp.Diff(wantErr, errString(err)); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
	if ExitCode(err) != ExitConfigError {
		t.Errorf("exit code: got %d, want %d", ExitCode(err), ExitConfigError)
	}

	pending, err = ReachedAll(fleet(), WaitError)
	if diff := cmp.Diff([]string{"node-a-active", "node-b-pending", "node-d-unreported"}, pending); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
	if err != nil {
		t.Errorf("error: %v", err)
	}

	if _, err := ReachedAll(fleet(), ""); errString(err) != `invalid --wait-for "": must be "active" or "error"` {
		t.Errorf("error: %v", err)
	}
}

func TestExitCode(t *testing.T) {
	tests := map[string]struct {
		err  error
		want int
	}{
		"nil":                {want: ExitOK},
		"other":              {err: errors.New("boom"), want: ExitFailure},
		"config error":       {err: fmt.Errorf("node %q: %w: x", "n1", ErrConfigError), want: ExitConfigError},
		"timeout":            {err: fmt.Errorf("wait: %w", ErrTimeout), want: ExitTimeout},
		"config and timeout": {err: errors.Join(ErrTimeout, ErrConfigError), want: ExitConfigError},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ExitCode(tc.err); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}
