package configz

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// generic decodes JSON into plain Go values, numbers as float64, for
// comparing documents by value.
func generic(t *testing.T, data []byte) (any, bool) {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, false
	}
	return v, true
}

// FuzzTransform checks the seed transform (the old workflow's jq
// expression) on any configz response:
//   - it accepts exactly the JSON objects whose .kubeletconfig is an object,
//     and refuses the others with ErrNoKubeletConfig or a decode error;
//   - its output is a JSON object equal, field by field, to .kubeletconfig,
//     except that kind and apiVersion are set: kept when present and
//     neither null nor false (jq's //), else KubeletConfiguration and
//     kubelet.config.k8s.io/v1beta1;
//   - it is idempotent: transforming {"kubeletconfig": output} gives the
//     output again, byte for byte.
func FuzzTransform(f *testing.F) {
	t0, err := NewTransformer("")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, err := t0.Transform(context.Background(), raw)
		var in map[string]any
		decodeErr := json.Unmarshal(raw, &in)
		cfg, isObject := in["kubeletconfig"].(map[string]any)
		if err != nil {
			if out != nil {
				t.Fatalf("Transform() returned output with error %v", err)
			}
			if decodeErr == nil && isObject {
				t.Fatalf("Transform() refused a response with a .kubeletconfig object: %v", err)
			}
			if json.Valid(raw) && !errors.Is(err, ErrNoKubeletConfig) && decodeErr == nil {
				t.Fatalf("Transform() error %q for valid JSON, want ErrNoKubeletConfig", err)
			}
			return
		}
		if !json.Valid(raw) {
			t.Fatalf("Transform() accepted invalid JSON %q", raw)
		}
		got, ok := generic(t, out)
		if !ok {
			// encoding/json cannot hold a number such as 1e400 in a
			// float64; the output must still be valid JSON.
			if !json.Valid(out) {
				t.Fatalf("Transform() wrote invalid JSON:\n%s", out)
			}
		} else {
			obj, isObj := got.(map[string]any)
			if !isObj {
				t.Fatalf("Transform() wrote a non-object:\n%s", out)
			}
			if decodeErr == nil && isObject {
				want := map[string]any{}
				for k, v := range cfg {
					want[k] = v
				}
				for _, tm := range []struct{ key, def string }{{"kind", "KubeletConfiguration"}, {"apiVersion", "kubelet.config.k8s.io/v1beta1"}} {
					if v, ok := want[tm.key]; !ok || v == nil || v == false {
						want[tm.key] = tm.def
					}
				}
				if !reflect.DeepEqual(want, obj) {
					t.Fatalf("Transform() changed the config:\n in: %s\nout: %s", raw, out)
				}
			}
		}
		wrapped := append(append([]byte(`{"kubeletconfig":`), bytes.TrimSpace(out)...), '}')
		again, err := t0.Transform(context.Background(), wrapped)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("Transform() is not idempotent: %v\n%s\n%s", err, out, again)
		}
	})
}
