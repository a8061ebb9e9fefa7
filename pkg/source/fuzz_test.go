package source

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// applyPatch is PatchedNode, failing the test on an error.
func applyPatch(t *testing.T, node *corev1.Node, patch []byte) *corev1.Node {
	t.Helper()
	out, err := PatchedNode(node, patch)
	if err != nil {
		t.Fatalf("apply patch %s: %v", patch, err)
	}
	return out
}

// absent reports whether an annotation value means "no value": Assigned and
// Status return nil for it.
func absent(value string) bool {
	v := strings.TrimSpace(value)
	return v == "" || v == "null"
}

// FuzzAssignedAnnotation checks the parser of the assignment annotation:
//   - it returns nil exactly for an empty or null value, an error (naming
//     the node and the annotation) exactly for invalid JSON, and else a
//     source held by the annotation carrier;
//   - ValidateSource judges a parsed source consistently: AssignPatch refuses
//     exactly the sources it refuses, with the same error, matching
//     ErrInvalidSource;
//   - an accepted source survives the round trip through AssignPatch and the
//     parser unchanged, through either carrier, and the patch written for the
//     parsed source is byte for byte the one written for the original.
func FuzzAssignedAnnotation(f *testing.F) {
	f.Fuzz(func(t *testing.T, value string) {
		n := node(map[string]string{AssignedAnnotation: value, "other": "kept"})
		src, c, err := Assigned(n)
		if err != nil {
			if want := `node "n1": annotation ` + AssignedAnnotation + `: invalid JSON: `; !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("Assigned() error %q, want prefix %q", err, want)
			}
			if json.Unmarshal([]byte(value), &corev1.NodeConfigSource{}) == nil {
				t.Fatalf("Assigned() refused what encoding/json decodes: %v", err)
			}
			return
		}
		if src == nil {
			if !absent(value) || c != "" {
				t.Fatalf("Assigned() = nil, %q for %q", c, value)
			}
			return
		}
		if absent(value) || c != Annotation {
			t.Fatalf("Assigned() = %v, %q for %q", src, c, value)
		}
		verr := ValidateSource(src)
		_, perr := AssignPatch(Annotation, src, nil)
		if verr != nil {
			if !errors.Is(verr, ErrInvalidSource) {
				t.Fatalf("ValidateSource() error %q does not match ErrInvalidSource", verr)
			}
			if errString(perr) != verr.Error() {
				t.Fatalf("AssignPatch() error %q, want ValidateSource's %q", errString(perr), verr)
			}
			return
		}
		if perr != nil {
			t.Fatalf("AssignPatch() refused a valid source: %v", perr)
		}
		for _, carrier := range []Carrier{Annotation, Native} {
			p, err := AssignPatch(carrier, src, nil)
			if err != nil {
				t.Fatal(err)
			}
			after := applyPatch(t, n, p)
			got, gotCarrier, err := Assigned(after)
			if err != nil {
				t.Fatalf("%s round trip: %v", carrier, err)
			}
			if diff := cmp.Diff(src, got); diff != "" || gotCarrier != carrier {
				t.Fatalf("%s round trip changed the source (carrier %q) (-want +got):\n%s", carrier, gotCarrier, diff)
			}
			if after.Annotations["other"] != "kept" {
				t.Fatalf("%s patch touched another annotation", carrier)
			}
			if carrier == Native && after.Annotations[AssignedAnnotation] != "" {
				t.Fatalf("native patch left the annotation %q", after.Annotations[AssignedAnnotation])
			}
			if carrier == Annotation && after.Spec.ConfigSource != nil {
				t.Fatalf("annotation patch left spec.configSource %v", after.Spec.ConfigSource)
			}
			if ValidateSource(got) != nil {
				t.Fatalf("%s round trip made a valid source invalid: %v", carrier, ValidateSource(got))
			}
			again, err := AssignPatch(carrier, got, nil)
			if err != nil || !bytes.Equal(again, p) {
				t.Fatalf("%s patch is not stable: %v\n%s\n%s", carrier, err, p, again)
			}
		}
		if _, err := AssignPatch(Annotation, nil, nil); err != nil {
			t.Fatal(err)
		}
		cleared := applyPatch(t, n, mustPatch(t, Annotation, nil))
		if got, c, err := Assigned(cleared); got != nil || c != "" || err != nil {
			t.Fatalf("after removing the assignment: %v, %q, %v", got, c, err)
		}
	})
}

func mustPatch(t *testing.T, c Carrier, src *corev1.NodeConfigSource) []byte {
	t.Helper()
	p, err := AssignPatch(c, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// FuzzStatusAnnotation checks the parser of the status annotation:
//   - it returns nil exactly for an empty or null value, an error exactly
//     for invalid JSON, and else a status held by the annotation carrier;
//   - every parsed status survives the round trip through StatusPatch and
//     the parser unchanged, through either carrier, with the other carrier
//     cleared and other annotations kept, and its patch is stable.
func FuzzStatusAnnotation(f *testing.F) {
	f.Fuzz(func(t *testing.T, value string) {
		n := node(map[string]string{StatusAnnotation: value, "other": "kept"})
		st, c, err := Status(n)
		if err != nil {
			if want := `node "n1": annotation ` + StatusAnnotation + `: invalid JSON: `; !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("Status() error %q, want prefix %q", err, want)
			}
			return
		}
		if st == nil {
			if !absent(value) || c != "" {
				t.Fatalf("Status() = nil, %q for %q", c, value)
			}
			return
		}
		if absent(value) || c != Annotation {
			t.Fatalf("Status() = %v, %q for %q", st, c, value)
		}
		for _, carrier := range []Carrier{Annotation, Native} {
			p, err := StatusPatch(carrier, st, nil)
			if err != nil {
				t.Fatalf("StatusPatch(%s): %v", carrier, err)
			}
			after := applyPatch(t, n, p)
			got, gotCarrier, err := Status(after)
			if err != nil {
				t.Fatalf("%s round trip: %v", carrier, err)
			}
			if diff := cmp.Diff(st, got); diff != "" || gotCarrier != carrier {
				t.Fatalf("%s round trip changed the status (carrier %q) (-want +got):\n%s", carrier, gotCarrier, diff)
			}
			if after.Annotations["other"] != "kept" {
				t.Fatalf("%s patch touched another annotation", carrier)
			}
			if carrier == Native && after.Annotations[StatusAnnotation] != "" {
				t.Fatalf("native patch left the annotation %q", after.Annotations[StatusAnnotation])
			}
			if carrier == Annotation && after.Status.Config != nil {
				t.Fatalf("annotation patch left status.config %v", after.Status.Config)
			}
			again, err := StatusPatch(carrier, got, nil)
			if err != nil || !bytes.Equal(again, p) {
				t.Fatalf("%s patch is not stable: %v\n%s\n%s", carrier, err, p, again)
			}
		}
	})
}
