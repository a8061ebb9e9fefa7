package rollout

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// TestMarkPatch: the mark goes in the same patch as the assignment, or as
// the cordon; each reads back as written, and a patch without a mark
// leaves the node's mark as it is.
func TestMarkPatch(t *testing.T) {
	pin := source.NewPin(cm("new"), []byte("new bytes"), nil)
	r := New(source.DefaultNamespace, "r1", Spec{Config: cm("new"), Pin: pin, Nodes: []string{"n1"}, MaxUnavailable: intstr.FromInt32(1)})
	r.UID = r1UID
	at := metav1.NewMicroTime(t0)
	mark := newMark(r, "n1", cm("old"), nil, false, at)
	if diff := cmp.Diff(&Mark{Rollout: "kube-system/r1", UID: r1UID, Revision: pin.Digest, Previous: cm("old"), Started: at}, mark); diff != "" {
		t.Fatalf("newMark (-want +got):\n%s", diff)
	}
	assign, err := source.AssignPatch(source.Annotation, cm("new"), pin)
	if err != nil {
		t.Fatal(err)
	}
	otherMark := &Mark{Rollout: "kube-system/other", UID: "uid-other"}
	withOther := func() *corev1.Node {
		n := readyNode("n1", nil)
		p, err := markPatch(nil, otherMark, nil)
		if err != nil {
			t.Fatal(err)
		}
		n, err = source.PatchedNode(n, p)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	tests := map[string]struct {
		patch         []byte
		mark          *Mark
		unschedulable *bool
		// want: the node's assignment, mark and spec.unschedulable after.
		wantHeld          *corev1.NodeConfigSource
		wantMark          *Mark
		wantUnschedulable bool
	}{
		"the assignment and the mark, in one patch": {
			patch: assign, mark: mark,
			wantHeld: cm("new"), wantMark: mark,
		},
		"the cordon and the mark, in one patch": {
			mark: &Mark{Rollout: "kube-system/r1", UID: r1UID, Cordoned: true, Started: at}, unschedulable: ptr.To(true),
			wantMark: &Mark{Rollout: "kube-system/r1", UID: r1UID, Cordoned: true, Started: at}, wantUnschedulable: true,
		},
		"an assignment without a mark leaves the node's mark alone": {
			patch:    assign,
			wantHeld: cm("new"), wantMark: otherMark,
		},
		"an uncordon without a mark leaves the node's mark alone": {
			unschedulable: ptr.To(false),
			wantMark:      otherMark,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := markPatch(tc.patch, tc.mark, tc.unschedulable)
			if err != nil {
				t.Fatal(err)
			}
			node := withOther()
			node.Spec.Unschedulable = true
			got, err := source.PatchedNode(node, p)
			if err != nil {
				t.Fatal(err)
			}
			held, _, err := source.Assigned(got)
			if err != nil {
				t.Fatal(err)
			}
			if !source.Equal(held, tc.wantHeld) {
				t.Errorf("node holds %s, want %s", DescribeTarget(held), DescribeTarget(tc.wantHeld))
			}
			if tc.wantHeld != nil && !source.Holds(got, cm("new"), pin) {
				t.Errorf("node lost its pin: %v", got.Annotations)
			}
			m, err := MarkOf(got)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantMark, m); diff != "" {
				t.Errorf("mark (-want +got):\n%s", diff)
			}
			wantUnschedulable := tc.wantUnschedulable || tc.unschedulable == nil
			if got.Spec.Unschedulable != wantUnschedulable {
				t.Errorf("unschedulable %v, want %v", got.Spec.Unschedulable, wantUnschedulable)
			}
		})
	}
}

// TestMarkOwns: a mark names a rollout by its UID: a rollout created again
// under the same name does not own its predecessor's nodes, and a rollout
// without a UID owns none.
func TestMarkOwns(t *testing.T) {
	r := New(source.DefaultNamespace, "r1", Spec{})
	r.UID = r1UID
	noUID := New(source.DefaultNamespace, "r1", Spec{})
	tests := map[string]struct {
		mark *Mark
		r    *Rollout
		want bool
	}{
		"its own":                     {mark: markOf(nil, false), r: r, want: true},
		"none":                        {r: r},
		"same name, another UID":      {mark: &Mark{Rollout: "kube-system/r1", UID: "uid-earlier"}, r: r},
		"a rollout without a UID":     {mark: &Mark{Rollout: "kube-system/r1"}, r: noUID},
		"another rollout of that UID": {mark: &Mark{Rollout: "kube-system/renamed", UID: r1UID}, r: r, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.mark.Owns(tc.r); got != tc.want {
				t.Errorf("Owns = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestMarkOf: a node's mark is read from its annotation; none, or an empty
// one, is no mark, and one that does not decode is an error naming the
// node and the annotation.
func TestMarkOf(t *testing.T) {
	tests := map[string]struct {
		value   *string
		want    *Mark
		wantErr string
	}{
		"no annotation": {},
		"empty":         {value: ptr.To("")},
		"a mark": {
			value: ptr.To(`{"rollout":"kube-system/r1","uid":"uid-r1","previous":{"configMap":{"namespace":"kube-system","name":"old","kubeletConfigKey":"kubelet"}},"cordoned":true,"started":"2026-11-23T05:19:00.000000Z"}`),
			want:  markOf(cm("old"), true),
		},
		"garbage": {value: ptr.To("{"), wantErr: `node "n1": annotation kubectl-dkc.io/rollout: `},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := readyNode("n1", nil)
			if tc.value != nil {
				n.Annotations = map[string]string{MarkAnnotation: *tc.value}
			}
			got, err := MarkOf(n)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q...", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
