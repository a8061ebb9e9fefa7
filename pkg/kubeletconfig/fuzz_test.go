package kubeletconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// encode is cfg as JSON with its kind and apiVersion, as a decoded config
// is written back.
func encode(t *testing.T, cfg *config) []byte {
	t.Helper()
	c := cfg.DeepCopy()
	c.Kind, c.APIVersion = Kind, APIVersion
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatalf("encode a decoded config: %v", err)
	}
	return data
}

// FuzzDecode checks the decoder and the validator on any input:
//   - every error wraps ErrLoad (Decode) or ErrValidate (Validate), which
//     the agent maps to upstream's status strings;
//   - what strict decoding accepts, lenient decoding accepts too, with the
//     same config and no warnings;
//   - decode → Normalize → decode is exact: the same config, the same
//     Validate result, and Normalize is idempotent. Normalize is how dkc
//     re-encodes a document (diff compares its output), so a diff that says
//     "same" means the same config;
//   - decode → encode the typed struct → decode gives a semantically equal
//     config, and from there on is byte for byte stable. This hop is not
//     exact: the struct's omitempty turns enforceNodeAllocatable: [] into an
//     absent field, which the kubelet reads as [pods] (found by the seed
//     empty-list). dkc therefore never writes a config by re-encoding the
//     struct; it keeps the document's bytes.
//
// The seed corpus is testdata/fuzz/FuzzDecode; `make fuzz` runs it longer.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, warnings, err := Decode(data, DecodeOptions{})
		lenient, lenientWarnings, lenientErr := Decode(data, DecodeOptions{AllowUnknownFields: true})
		if err != nil {
			if !errors.Is(err, ErrLoad) {
				t.Fatalf("Decode() error %q does not wrap ErrLoad", err)
			}
			if lenientErr != nil && !errors.Is(lenientErr, ErrLoad) {
				t.Fatalf("lenient Decode() error %q does not wrap ErrLoad", lenientErr)
			}
			return
		}
		if len(warnings) != 0 {
			t.Fatalf("strict Decode() accepted the input with warnings %q", warnings)
		}
		if lenientErr != nil || len(lenientWarnings) != 0 {
			t.Fatalf("strict Decode() accepts what lenient Decode() does not: error %v, warnings %q", lenientErr, lenientWarnings)
		}
		if diff := cmp.Diff(cfg, lenient); diff != "" {
			t.Fatalf("strict and lenient Decode() differ (-strict +lenient):\n%s", diff)
		}
		verr := Validate(cfg)
		if verr != nil && !errors.Is(verr, ErrValidate) {
			t.Fatalf("Validate() error %q does not wrap ErrValidate", verr)
		}

		// The document re-encoded as dkc re-encodes it.
		norm, err := Normalize(data)
		if err != nil {
			t.Fatalf("Normalize() fails on a document Decode() accepts: %v", err)
		}
		normCfg, _, err := Decode(norm, DecodeOptions{})
		if err != nil {
			t.Fatalf("a normalized config does not decode: %v\n%s", err, norm)
		}
		if diff := cmp.Diff(cfg, normCfg); diff != "" {
			t.Fatalf("decode → Normalize → decode changed the config (-before +after):\n%s", diff)
		}
		if got, want := errString(Validate(normCfg)), errString(verr); got != want {
			t.Fatalf("Validate() after Normalize: got %q, want %q", got, want)
		}
		if again, err := Normalize(norm); err != nil || !bytes.Equal(again, norm) {
			t.Fatalf("Normalize() is not idempotent: %v\n%s\n%s", err, norm, again)
		}

		// The typed struct re-encoded.
		enc1 := encode(t, cfg)
		cfg2, warnings2, err := Decode(enc1, DecodeOptions{})
		if err != nil || len(warnings2) != 0 {
			t.Fatalf("a decoded config, encoded again, does not decode: %v %q\n%s", err, warnings2, enc1)
		}
		c1, c2 := cfg.DeepCopy(), cfg2.DeepCopy()
		c1.TypeMeta = c2.TypeMeta
		if !apiequality.Semantic.DeepEqual(c1, c2) {
			t.Fatalf("decode → encode → decode changed the config (-first +second):\n%s", cmp.Diff(c1, c2))
		}
		enc2 := encode(t, cfg2)
		if !bytes.Equal(enc1, enc2) {
			t.Fatalf("encode → decode → encode is not stable:\n%s\n%s", enc1, enc2)
		}
		cfg3, _, err := Decode(enc2, DecodeOptions{})
		if err != nil || !reflect.DeepEqual(cfg2, cfg3) {
			t.Fatalf("a second round trip changed the config: %v\n%s", err, cmp.Diff(cfg2, cfg3))
		}
		if got, want := errString(Validate(cfg3)), errString(Validate(cfg2)); got != want {
			t.Fatalf("Validate() after a second round trip: got %q, want %q", got, want)
		}
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
