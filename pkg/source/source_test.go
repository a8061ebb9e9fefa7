package source

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// cm returns a valid assignment of ConfigMap kube-system/name.
func cm(name string) *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: DefaultNamespace, Name: name, KubeletConfigKey: DefaultKey,
	}}
}

// checkpointed returns cm(name) with the uid and resourceVersion a status
// carries.
func checkpointed(name, uid, rv string) *corev1.NodeConfigSource {
	src := cm(name)
	src.ConfigMap.UID = types.UID(uid)
	src.ConfigMap.ResourceVersion = rv
	return src
}

func node(annotations map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: annotations}}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestParseCarrier(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    Carrier
		wantErr string
	}{
		"auto":       {in: "auto", want: Auto},
		"native":     {in: "native", want: Native},
		"annotation": {in: "annotation", want: Annotation},
		"empty":      {in: "", wantErr: `invalid --carrier "": must be one of auto, native, annotation`},
		"case":       {in: "Native", wantErr: `invalid --carrier "Native": must be one of auto, native, annotation`},
		"unknown":    {in: "label", wantErr: `invalid --carrier "label": must be one of auto, native, annotation`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseCarrier(tc.in)
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAssigned(t *testing.T) {
	tests := map[string]struct {
		node        *corev1.Node
		want        *corev1.NodeConfigSource
		wantCarrier Carrier
		wantErr     string
	}{
		"none": {node: node(nil)},
		"native": {
			node:        &corev1.Node{Spec: corev1.NodeSpec{ConfigSource: cm("a")}},
			want:        cm("a"),
			wantCarrier: Native,
		},
		"annotation": {
			node:        node(map[string]string{AssignedAnnotation: `{"configMap":{"namespace":"kube-system","name":"b","kubeletConfigKey":"kubelet"}}`}),
			want:        cm("b"),
			wantCarrier: Annotation,
		},
		"native wins over annotation": {
			node: &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AssignedAnnotation: `{"configMap":{"namespace":"kube-system","name":"b","kubeletConfigKey":"kubelet"}}`}},
				Spec:       corev1.NodeSpec{ConfigSource: cm("a")},
			},
			want:        cm("a"),
			wantCarrier: Native,
		},
		"unknown fields ignored": {
			node:        node(map[string]string{AssignedAnnotation: `{"configMap":{"namespace":"kube-system","name":"b","kubeletConfigKey":"kubelet","future":1}}`}),
			want:        cm("b"),
			wantCarrier: Annotation,
		},
		"all nil subfields returned for validation": {
			node:        node(map[string]string{AssignedAnnotation: `{}`}),
			want:        &corev1.NodeConfigSource{},
			wantCarrier: Annotation,
		},
		"empty annotation": {node: node(map[string]string{AssignedAnnotation: ""})},
		"null annotation":  {node: node(map[string]string{AssignedAnnotation: "null"})},
		"invalid JSON": {
			node:    node(map[string]string{AssignedAnnotation: `{"configMap":`}),
			wantErr: `node "n1": annotation kubectl-dkc.io/config-source: invalid JSON: unexpected end of JSON input`,
		},
		"wrong type": {
			node:    node(map[string]string{AssignedAnnotation: `"kube-system/a"`}),
			wantErr: `node "n1": annotation kubectl-dkc.io/config-source: invalid JSON: json: cannot unmarshal string into Go value of type v1.NodeConfigSource`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, carrier, err := Assigned(tc.node)
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("source (-want +got):\n%s", diff)
			}
			if carrier != tc.wantCarrier {
				t.Errorf("carrier: got %q, want %q", carrier, tc.wantCarrier)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	st := &corev1.NodeConfigStatus{
		Assigned:      checkpointed("b", "u2", "2"),
		Active:        checkpointed("a", "u1", "1"),
		LastKnownGood: checkpointed("a", "u1", "1"),
		Error:         "failed to validate config, see Kubelet log for details",
	}
	tests := map[string]struct {
		node        *corev1.Node
		want        *corev1.NodeConfigStatus
		wantCarrier Carrier
		wantErr     string
	}{
		"none": {node: node(nil)},
		"native": {
			node:        &corev1.Node{Status: corev1.NodeStatus{Config: st}},
			want:        st,
			wantCarrier: Native,
		},
		"annotation": {
			node: node(map[string]string{StatusAnnotation: `{"assigned":{"configMap":{"namespace":"kube-system","name":"b","uid":"u2","resourceVersion":"2","kubeletConfigKey":"kubelet"}},` +
				`"active":{"configMap":{"namespace":"kube-system","name":"a","uid":"u1","resourceVersion":"1","kubeletConfigKey":"kubelet"}},` +
				`"lastKnownGood":{"configMap":{"namespace":"kube-system","name":"a","uid":"u1","resourceVersion":"1","kubeletConfigKey":"kubelet"}},` +
				`"error":"failed to validate config, see Kubelet log for details"}`}),
			want:        st,
			wantCarrier: Annotation,
		},
		"local": {
			node:        node(map[string]string{StatusAnnotation: `{}`}),
			want:        &corev1.NodeConfigStatus{},
			wantCarrier: Annotation,
		},
		"native wins over annotation": {
			node: &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{StatusAnnotation: `{"error":"x"}`}},
				Status:     corev1.NodeStatus{Config: st},
			},
			want:        st,
			wantCarrier: Native,
		},
		"invalid JSON": {
			node:    node(map[string]string{StatusAnnotation: `{`}),
			wantErr: `node "n1": annotation kubectl-dkc.io/config-status: invalid JSON: unexpected end of JSON input`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, carrier, err := Status(tc.node)
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if carrier != tc.wantCarrier {
				t.Errorf("carrier: got %q, want %q", carrier, tc.wantCarrier)
			}
		})
	}
}

func TestAssignPatch(t *testing.T) {
	tests := map[string]struct {
		carrier Carrier
		src     *corev1.NodeConfigSource
		pin     *Pin
		want    string
		wantErr string
	}{
		"native": {
			carrier: Native,
			src:     cm("a"),
			want: `{"metadata":{"annotations":{"kubectl-dkc.io/config-pin":null,"kubectl-dkc.io/config-source":null}},` +
				`"spec":{"configSource":{"configMap":{"kubeletConfigKey":"kubelet","name":"a","namespace":"kube-system","resourceVersion":null,"uid":null}}}}`,
		},
		"annotation": {
			carrier: Annotation,
			src:     cm("a"),
			want: `{"metadata":{"annotations":{"kubectl-dkc.io/config-pin":null,"kubectl-dkc.io/config-source":"{\"configMap\":{\"namespace\":\"kube-system\",\"name\":\"a\",\"kubeletConfigKey\":\"kubelet\"}}"}},` +
				`"spec":{"configSource":null}}`,
		},
		"native pinned": {
			carrier: Native,
			src:     cm("a"),
			pin:     NewPin(cm("a"), []byte("x"), []string{"security", "host-access", "security"}),
			want: `{"metadata":{"annotations":{"kubectl-dkc.io/config-pin":"{\"namespace\":\"kube-system\",\"name\":\"a\",\"kubeletConfigKey\":\"kubelet\",` +
				`\"digest\":\"sha256:2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881\",\"allowUnsafe\":[\"host-access\",\"security\"]}",` +
				`"kubectl-dkc.io/config-source":null}},` +
				`"spec":{"configSource":{"configMap":{"kubeletConfigKey":"kubelet","name":"a","namespace":"kube-system","resourceVersion":null,"uid":null}}}}`,
		},
		"pin for another reference": {
			carrier: Annotation,
			src:     cm("a"),
			pin:     NewPin(cm("b"), []byte("x"), nil),
			wantErr: `pin for kube-system/b key "kubelet" does not pin the assignment of kube-system/a key "kubelet"`,
		},
		"local drops the pin": {
			carrier: Annotation,
			pin:     NewPin(cm("a"), []byte("x"), nil),
			want:    `{"metadata":{"annotations":{"kubectl-dkc.io/config-pin":null,"kubectl-dkc.io/config-source":null}},"spec":{"configSource":null}}`,
		},
		"native local": {
			carrier: Native,
			want:    `{"metadata":{"annotations":{"kubectl-dkc.io/config-pin":null,"kubectl-dkc.io/config-source":null}},"spec":{"configSource":null}}`,
		},
		"annotation local": {
			carrier: Annotation,
			want:    `{"metadata":{"annotations":{"kubectl-dkc.io/config-pin":null,"kubectl-dkc.io/config-source":null}},"spec":{"configSource":null}}`,
		},
		"auto": {
			carrier: Auto,
			src:     cm("a"),
			wantErr: `carrier "auto": resolve it with Detect before writing`,
		},
		"empty carrier": {
			carrier: "",
			src:     cm("a"),
			wantErr: `carrier "": unknown, want "native" or "annotation"`,
		},
		"invalid source": {
			carrier: Native,
			src:     checkpointed("a", "u1", "1"),
			wantErr: `invalid config source: configMap kube-system/a: uid is forbidden in an assignment; resourceVersion is forbidden in an assignment`,
		},
		"all nil": {
			carrier: Annotation,
			src:     &corev1.NodeConfigSource{},
			wantErr: AllNilSubfieldsError,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := AssignPatch(tc.carrier, tc.src, tc.pin)
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAssignPatchApplied applies the patches as JSON merge patches (through
// the fake clientset's object tracker) to nodes that already hold an
// assignment, and reads the result back.
func TestAssignPatchApplied(t *testing.T) {
	stale := checkpointed("old", "u0", "0") // uid and rv must not survive
	annotated := map[string]string{AssignedAnnotation: `{"configMap":{"namespace":"kube-system","name":"old","kubeletConfigKey":"kubelet"}}`, "other": "kept"}
	tests := map[string]struct {
		before      *corev1.Node
		carrier     Carrier
		src         *corev1.NodeConfigSource
		want        *corev1.NodeConfigSource
		wantCarrier Carrier
	}{
		"native over native": {
			before:  &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{ConfigSource: stale}},
			carrier: Native, src: cm("new"), want: cm("new"), wantCarrier: Native,
		},
		"native over annotation": {
			before:  &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: annotated}},
			carrier: Native, src: cm("new"), want: cm("new"), wantCarrier: Native,
		},
		"annotation over native": {
			before:  &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{ConfigSource: stale}},
			carrier: Annotation, src: cm("new"), want: cm("new"), wantCarrier: Annotation,
		},
		"annotation over annotation": {
			before:  &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: annotated}},
			carrier: Annotation, src: cm("new"), want: cm("new"), wantCarrier: Annotation,
		},
		"local over both": {
			before: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: annotated}, Spec: corev1.NodeSpec{ConfigSource: stale}},
			// both carriers are cleared whatever the carrier
			carrier: Annotation,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset(tc.before)
			patch, err := AssignPatch(tc.carrier, tc.src, nil)
			if err != nil {
				t.Fatal(err)
			}
			after, err := client.CoreV1().Nodes().Patch(context.Background(), "n1", types.MergePatchType, patch, metav1.PatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, carrier, err := Assigned(after)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("source (-want +got):\n%s", diff)
			}
			if carrier != tc.wantCarrier {
				t.Errorf("carrier: got %q, want %q", carrier, tc.wantCarrier)
			}
			if tc.carrier == Annotation && after.Spec.ConfigSource != nil {
				t.Errorf("spec.configSource not cleared: %+v", after.Spec.ConfigSource)
			}
			if _, ok := after.Annotations[AssignedAnnotation]; ok && (tc.carrier == Native || tc.src == nil) {
				t.Errorf("annotation not cleared: %q", after.Annotations[AssignedAnnotation])
			}
			if tc.before.Annotations["other"] != after.Annotations["other"] {
				t.Errorf("other annotation changed: %q", after.Annotations["other"])
			}
		})
	}
}

func TestStatusPatch(t *testing.T) {
	st := &corev1.NodeConfigStatus{
		Assigned:      checkpointed("b", "u2", "2"),
		Active:        checkpointed("b", "u2", "2"),
		LastKnownGood: nil,
	}
	tests := map[string]struct {
		carrier Carrier
		st      *corev1.NodeConfigStatus
		want    string
		wantErr string
	}{
		"native": {
			carrier: Native,
			st:      st,
			want: `{"metadata":{"annotations":{"kubectl-dkc.io/config-status":null}},"status":{"config":{` +
				`"active":{"configMap":{"kubeletConfigKey":"kubelet","name":"b","namespace":"kube-system","resourceVersion":"2","uid":"u2"}},` +
				`"assigned":{"configMap":{"kubeletConfigKey":"kubelet","name":"b","namespace":"kube-system","resourceVersion":"2","uid":"u2"}},` +
				`"error":null,"lastKnownGood":null}}}`,
		},
		"annotation": {
			carrier: Annotation,
			st:      st,
			want: `{"metadata":{"annotations":{"kubectl-dkc.io/config-status":"{\"assigned\":{\"configMap\":{\"namespace\":\"kube-system\",\"name\":\"b\",\"uid\":\"u2\",\"resourceVersion\":\"2\",\"kubeletConfigKey\":\"kubelet\"}},` +
				`\"active\":{\"configMap\":{\"namespace\":\"kube-system\",\"name\":\"b\",\"uid\":\"u2\",\"resourceVersion\":\"2\",\"kubeletConfigKey\":\"kubelet\"}}}"}},` +
				`"status":{"config":null}}`,
		},
		"annotation local": {
			carrier: Annotation,
			st:      &corev1.NodeConfigStatus{},
			want:    `{"metadata":{"annotations":{"kubectl-dkc.io/config-status":"{}"}},"status":{"config":null}}`,
		},
		"nil": {
			carrier: Native,
			want:    `{"metadata":{"annotations":{"kubectl-dkc.io/config-status":null}},"status":{"config":null}}`,
		},
		"auto": {
			carrier: Auto,
			st:      st,
			wantErr: `carrier "auto": resolve it with Detect before writing`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := StatusPatch(tc.carrier, tc.st, nil)
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStatusPatchApplied checks that a native status patch replaces the old
// status whole: an error and an LKG the new status lacks are removed.
func TestStatusPatchApplied(t *testing.T) {
	before := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{StatusAnnotation: `{"error":"old"}`}},
		Status: corev1.NodeStatus{Config: &corev1.NodeConfigStatus{
			Assigned:      checkpointed("b", "u2", "2"),
			Active:        checkpointed("a", "u1", "1"),
			LastKnownGood: checkpointed("a", "u1", "1"),
			Error:         validateErrorString,
		}},
	}
	want := &corev1.NodeConfigStatus{Assigned: checkpointed("c", "u3", "3"), Active: checkpointed("c", "u3", "3")}
	for _, c := range []Carrier{Native, Annotation} {
		t.Run(string(c), func(t *testing.T) {
			client := fake.NewClientset(before.DeepCopy())
			patch, err := StatusPatch(c, want, nil)
			if err != nil {
				t.Fatal(err)
			}
			after, err := client.CoreV1().Nodes().Patch(context.Background(), "n1", types.MergePatchType, patch, metav1.PatchOptions{}, "status")
			if err != nil {
				t.Fatal(err)
			}
			got, carrier, err := Status(after)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if carrier != c {
				t.Errorf("carrier: got %q, want %q", carrier, c)
			}
			if c == Native && after.Annotations[StatusAnnotation] != "" {
				t.Errorf("annotation not cleared: %q", after.Annotations[StatusAnnotation])
			}
		})
	}
}

// validateErrorString stands in for status.ValidateError, which this package
// cannot import.
const validateErrorString = "failed to validate config, see Kubelet log for details"

func TestDetect(t *testing.T) {
	tests := map[string]struct {
		keeps   bool
		err     error
		want    Carrier
		wantErr string
	}{
		"field kept":    {keeps: true, want: Native},
		"field dropped": {keeps: false, want: Annotation},
		"error": {
			err:     errors.New(`nodes "n1" is forbidden`),
			wantErr: `detect carrier of node "n1": dry-run patch: nodes "n1" is forbidden`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
			// The fake ignores dry-run and field dropping; the reactor plays
			// the apiserver. The real behaviour is proven in e2e.
			client.PrependReactor("patch", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
				patch := action.(k8stesting.PatchActionImpl)
				opts := patch.GetPatchOptions()
				if diff := cmp.Diff([]string{metav1.DryRunAll}, opts.DryRun); diff != "" {
					t.Errorf("dryRun (-want +got):\n%s", diff)
				}
				if opts.FieldManager != FieldManager {
					t.Errorf("field manager: got %q, want %q", opts.FieldManager, FieldManager)
				}
				if patch.GetPatchType() != types.MergePatchType {
					t.Errorf("patch type: got %q", patch.GetPatchType())
				}
				wantPatch := `{"spec":{"configSource":{"configMap":{"kubeletConfigKey":"kubelet","name":"dkc-carrier-probe","namespace":"kube-system","resourceVersion":null,"uid":null}}}}`
				if diff := cmp.Diff(wantPatch, string(patch.GetPatch())); diff != "" {
					t.Errorf("patch (-want +got):\n%s", diff)
				}
				if tc.err != nil {
					return true, nil, tc.err
				}
				n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
				if tc.keeps {
					n.Spec.ConfigSource = ProbeSource.DeepCopy()
				}
				return true, n, nil
			})
			got, err := Detect(context.Background(), client.CoreV1().Nodes(), "n1")
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDetectNotFound(t *testing.T) {
	_, err := Detect(context.Background(), fake.NewClientset().CoreV1().Nodes(), "n1")
	if err == nil || !strings.HasPrefix(err.Error(), `detect carrier of node "n1": dry-run patch: `) {
		t.Errorf("got %v, want an error naming the node", err)
	}
}

func TestValidateSource(t *testing.T) {
	withRef := func(f func(*corev1.ConfigMapNodeConfigSource)) *corev1.NodeConfigSource {
		src := cm("a")
		f(src.ConfigMap)
		return src
	}
	tests := map[string]struct {
		src     *corev1.NodeConfigSource
		wantErr string
	}{
		"valid":          {src: cm("a")},
		"local":          {src: nil},
		"dotted key":     {src: withRef(func(r *corev1.ConfigMapNodeConfigSource) { r.KubeletConfigKey = "kubelet.yaml" })},
		"all nil":        {src: &corev1.NodeConfigSource{}, wantErr: AllNilSubfieldsError},
		"missing fields": {src: &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{}}, wantErr: "invalid config source: configMap /: namespace is required; name is required; kubeletConfigKey is required"},
		"bad key": {
			src:     withRef(func(r *corev1.ConfigMapNodeConfigSource) { r.KubeletConfigKey = "a/b" }),
			wantErr: `invalid config source: configMap kube-system/a: kubeletConfigKey "a/b": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`,
		},
		"dot key": {
			src:     withRef(func(r *corev1.ConfigMapNodeConfigSource) { r.KubeletConfigKey = ".." }),
			wantErr: `invalid config source: configMap kube-system/a: kubeletConfigKey "..": must not be '..'`,
		},
		"bad name": {
			src:     withRef(func(r *corev1.ConfigMapNodeConfigSource) { r.Name = "A_b" }),
			wantErr: `invalid config source: configMap kube-system/A_b: name "A_b": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		},
		"uid": {
			src:     withRef(func(r *corev1.ConfigMapNodeConfigSource) { r.UID = "u1" }),
			wantErr: "invalid config source: configMap kube-system/a: uid is forbidden in an assignment",
		},
		"resourceVersion": {
			src:     withRef(func(r *corev1.ConfigMapNodeConfigSource) { r.ResourceVersion = "1" }),
			wantErr: "invalid config source: configMap kube-system/a: resourceVersion is forbidden in an assignment",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := ValidateSource(tc.src)
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if err != nil && !errors.Is(err, ErrInvalidSource) {
				t.Errorf("error %v does not match ErrInvalidSource", err)
			}
		})
	}
}

func TestErrAllNilSubfields(t *testing.T) {
	err := ValidateSource(&corev1.NodeConfigSource{})
	if !errors.Is(err, ErrAllNilSubfields) || !errors.Is(err, ErrInvalidSource) {
		t.Errorf("got %v, want ErrAllNilSubfields and ErrInvalidSource", err)
	}
	if errors.Is(ValidateSource(checkpointed("a", "u", "1")), ErrAllNilSubfields) {
		t.Error("a uid error matches ErrAllNilSubfields")
	}
}

func TestEqual(t *testing.T) {
	otherKey := cm("a")
	otherKey.ConfigMap.KubeletConfigKey = "other"
	tests := map[string]struct {
		a, b *corev1.NodeConfigSource
		want bool
	}{
		"both nil":             {want: true},
		"nil and source":       {a: cm("a")},
		"source and nil":       {b: cm("a")},
		"same":                 {a: cm("a"), b: cm("a"), want: true},
		"other name":           {a: cm("a"), b: cm("b")},
		"other key":            {a: cm("a"), b: otherKey},
		"assignment vs status": {a: cm("a"), b: checkpointed("a", "u1", "1"), want: true},
		"same checkpoint":      {a: checkpointed("a", "u1", "1"), b: checkpointed("a", "u1", "1"), want: true},
		"other uid":            {a: checkpointed("a", "u1", "1"), b: checkpointed("a", "u2", "1")},
		"other rv":             {a: checkpointed("a", "u1", "1"), b: checkpointed("a", "u1", "2")},
		"both all nil":         {a: &corev1.NodeConfigSource{}, b: &corev1.NodeConfigSource{}, want: true},
		"all nil and source":   {a: &corev1.NodeConfigSource{}, b: cm("a")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Equal(tc.a, tc.b); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSetCondition(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: t0, LastTransitionTime: t0}
	ok := func(status corev1.ConditionStatus, reason string, hb, tr metav1.Time) corev1.NodeCondition {
		return corev1.NodeCondition{Type: ConditionType, Status: status, Reason: reason, LastHeartbeatTime: hb, LastTransitionTime: tr}
	}
	tests := map[string]struct {
		conds []corev1.NodeCondition
		c     corev1.NodeCondition
		want  []corev1.NodeCondition
	}{
		"new": {
			conds: []corev1.NodeCondition{ready},
			c:     ok(corev1.ConditionTrue, "Active", metav1.Time{}, metav1.Time{}),
			want:  []corev1.NodeCondition{ready, ok(corev1.ConditionTrue, "Active", t1, t1)},
		},
		"nil list": {
			c:    ok(corev1.ConditionTrue, "Active", metav1.Time{}, metav1.Time{}),
			want: []corev1.NodeCondition{ok(corev1.ConditionTrue, "Active", t1, t1)},
		},
		"same status keeps transition time": {
			conds: []corev1.NodeCondition{ok(corev1.ConditionTrue, "Active", t0, t0), ready},
			c:     ok(corev1.ConditionTrue, "Reassigned", metav1.Time{}, metav1.Time{}),
			want:  []corev1.NodeCondition{ok(corev1.ConditionTrue, "Reassigned", t1, t0), ready},
		},
		"changed status": {
			conds: []corev1.NodeCondition{ready, ok(corev1.ConditionTrue, "Active", t0, t0)},
			c:     ok(corev1.ConditionFalse, "ValidateFailed", metav1.Time{}, metav1.Time{}),
			want:  []corev1.NodeCondition{ready, ok(corev1.ConditionFalse, "ValidateFailed", t1, t1)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := append([]corev1.NodeCondition(nil), tc.conds...)
			got := SetCondition(tc.conds, tc.c, t1)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.conds); diff != "" {
				t.Errorf("input modified (-before +after):\n%s", diff)
			}
		})
	}
}

func TestConditionPatch(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	got, err := ConditionPatch(corev1.NodeCondition{Type: ConditionType, Status: corev1.ConditionTrue, LastHeartbeatTime: t0, LastTransitionTime: t0})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"status":{"conditions":[{"lastHeartbeatTime":"2026-01-01T00:00:00Z","lastTransitionTime":"2026-01-01T00:00:00Z","message":null,"reason":null,"status":"True","type":"KubeletConfigOK"}]}}`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("patch (-want +got):\n%s", diff)
	}

	// Applied as a strategic merge patch, it replaces only its condition.
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: t0, LastTransitionTime: t0}
	client := fake.NewClientset(&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			ready,
			{Type: ConditionType, Status: corev1.ConditionFalse, Reason: "Failed", Message: "old", LastHeartbeatTime: t0, LastTransitionTime: t0},
		}},
	})
	after, err := client.CoreV1().Nodes().Patch(context.Background(), "n1", types.StrategicMergePatchType, got, metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	wantConds := []corev1.NodeCondition{ready, {Type: ConditionType, Status: corev1.ConditionTrue, LastHeartbeatTime: t0, LastTransitionTime: t0}}
	if diff := cmp.Diff(wantConds, after.Status.Conditions); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
}

// TestPin covers the pin's round trip through the Node annotation and what it
// pins: only the reference it names, with the digest of the exact bytes.
func TestPin(t *testing.T) {
	pin := NewPin(cm("a"), []byte("maxPods: 42\n"), []string{"security"})
	if got, want := pin.Digest, Digest([]byte("maxPods: 42\n")); got != want {
		t.Errorf("digest: got %q, want %q", got, want)
	}
	if pin.Digest == Digest([]byte("maxPods: 43\n")) {
		t.Error("two payloads have one digest")
	}
	if !pin.For(cm("a")) || pin.For(cm("b")) || pin.For(nil) || (*Pin)(nil).For(cm("a")) {
		t.Error("For: a pin pins exactly the reference it names")
	}
	patch, err := AssignPatch(Native, cm("a"), pin)
	if err != nil {
		t.Fatal(err)
	}
	node, err := PatchedNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, patch)
	if err != nil {
		t.Fatal(err)
	}
	got, err := PinOf(node)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(pin, got); diff != "" {
		t.Errorf("pin (-want +got):\n%s", diff)
	}
	if !got.Equal(pin) || got.Equal(NewPin(cm("a"), []byte("maxPods: 42\n"), nil)) {
		t.Error("Equal: the allowed classes are part of the pin")
	}
	if got, want := ShortDigest(pin.Digest), pin.Digest[:19]; got != want {
		t.Errorf("ShortDigest: got %q, want %q", got, want)
	}
	// Going back to the local config drops the pin too.
	patch, err = AssignPatch(Annotation, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	node, err = PatchedNode(node, patch)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := PinOf(node); err != nil || p != nil {
		t.Errorf("pin after reset: %+v, %v", p, err)
	}
}

func TestValidDigest(t *testing.T) {
	for d, want := range map[string]bool{
		Digest([]byte("kind: KubeletConfiguration\n")): true,
		"sha256:" + strings.Repeat("0", 64):            true,
		"sha256:" + strings.Repeat("A", 64):            false, // Digest writes lowercase
		"sha256:" + strings.Repeat("0", 63):            false,
		"sha256:" + strings.Repeat("0", 65):            false,
		strings.Repeat("0", 64):                        false,
		"sha512:" + strings.Repeat("0", 64):            false,
		ShortDigest(Digest([]byte("x"))):               false,
		"":                                             false,
	} {
		if got := ValidDigest(d); got != want {
			t.Errorf("ValidDigest(%q) = %t, want %t", d, got, want)
		}
	}
}
