package checkpoint

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzMetaSource checks the decoder of the store's meta files
// (meta/assigned, meta/last-known-good) on any content, as a crash or a
// foreign writer may leave it:
//   - empty content, and only that, is the local config (nil);
//   - a decoded source is one the store could have written: it passes
//     validateAssignable, so it names a checkpoint directory that is a base
//     name (no "/", not "." or "..", not a temporary's name);
//   - decode → encode → decode gives the same source, and encode is stable
//     from there on, byte for byte;
//   - an error never comes with a source.
func FuzzMetaSource(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		src, err := decodeSource(data)
		if err != nil {
			if src != nil {
				t.Fatalf("decodeSource() returned %v with error %v", src, err)
			}
			return
		}
		if src == nil {
			if len(data) != 0 {
				t.Fatalf("decodeSource(%q) = nil (the local config) for non-empty content", data)
			}
			return
		}
		if err := validateAssignable(src); err != nil {
			t.Fatalf("decodeSource() accepted a source the store cannot use: %v", err)
		}
		if _, err := checkpointRef(src); err != nil && !errors.Is(err, ErrInvalidSource) {
			t.Fatalf("checkpointRef() error %q does not match ErrInvalidSource", err)
		}
		enc, err := encodeSource(src)
		if err != nil {
			t.Fatalf("encodeSource() of a decoded source: %v", err)
		}
		if len(enc) == 0 {
			t.Fatal("encodeSource() wrote the local config for a ConfigMap source")
		}
		got, err := decodeSource(enc)
		if err != nil {
			t.Fatalf("decodeSource() refuses what encodeSource() wrote: %v\n%s", err, enc)
		}
		if diff := cmp.Diff(src, got); diff != "" {
			t.Fatalf("decode → encode → decode changed the source (-want +got):\n%s", diff)
		}
		again, err := encodeSource(got)
		if err != nil || !bytes.Equal(again, enc) {
			t.Fatalf("encodeSource() is not stable: %v\n%s\n%s", err, enc, again)
		}
	})
}
