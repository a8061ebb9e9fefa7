package kubeletconfig

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMergePatch(t *testing.T) {
	tests := map[string]struct {
		base, patch string
		want        string
		wantErr     string
	}{
		// RFC 7386 Appendix A, in order.
		"rfc 1 replace":                        {base: `{"a":"b"}`, patch: `{"a":"c"}`, want: `{"a":"c"}`},
		"rfc 2 add":                            {base: `{"a":"b"}`, patch: `{"b":"c"}`, want: `{"a":"b","b":"c"}`},
		"rfc 3 delete":                         {base: `{"a":"b"}`, patch: `{"a":null}`, want: `{}`},
		"rfc 4 delete one of two":              {base: `{"a":"b","b":"c"}`, patch: `{"a":null}`, want: `{"b":"c"}`},
		"rfc 5 list replaced by scalar":        {base: `{"a":["b"]}`, patch: `{"a":"c"}`, want: `{"a":"c"}`},
		"rfc 6 scalar replaced by list":        {base: `{"a":"c"}`, patch: `{"a":["b"]}`, want: `{"a":["b"]}`},
		"rfc 7 nested merge and delete":        {base: `{"a":{"b":"c"}}`, patch: `{"a":{"b":"d","c":null}}`, want: `{"a":{"b":"d"}}`},
		"rfc 8 lists are replaced":             {base: `{"a":[{"b":"c"}]}`, patch: `{"a":[1]}`, want: `{"a":[1]}`},
		"rfc 9 list replaces list":             {base: `["a","b"]`, patch: `["c","d"]`, want: `["c","d"]`},
		"rfc 10 list replaces object":          {base: `{"a":"b"}`, patch: `["c"]`, want: `["c"]`},
		"rfc 11 null replaces all":             {base: `{"a":"foo"}`, patch: `null`, want: `null`},
		"rfc 12 string replaces all":           {base: `{"a":"foo"}`, patch: `"bar"`, want: `"bar"`},
		"rfc 13 nulls in the base stay":        {base: `{"e":null}`, patch: `{"a":1}`, want: `{"a":1,"e":null}`},
		"rfc 14 object replaces list":          {base: `[1,2]`, patch: `{"a":"b","c":null}`, want: `{"a":"b"}`},
		"rfc 15 nested nulls leave empty maps": {base: `{}`, patch: `{"a":{"bb":{"ccc":null}}}`, want: `{"a":{"bb":{}}}`},
		"kubelet drop-in": {
			base:  `{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1","maxPods":110,"evictionHard":{"memory.available":"100Mi","nodefs.available":"10%"},"clusterDNS":["10.96.0.10"],"readOnlyPort":10255}`,
			patch: `{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1","maxPods":250,"evictionHard":{"memory.available":"500Mi"},"clusterDNS":["10.96.0.11"],"readOnlyPort":null}`,
			want:  `{"apiVersion":"kubelet.config.k8s.io/v1beta1","clusterDNS":["10.96.0.11"],"evictionHard":{"memory.available":"500Mi","nodefs.available":"10%"},"kind":"KubeletConfiguration","maxPods":250}`,
		},
		"numbers and html characters are kept": {
			base:  `{"big":9007199254740993,"f":0.10}`,
			patch: `{"s":"<a&b>"}`,
			want:  `{"big":9007199254740993,"f":0.10,"s":"<a&b>"}`,
		},
		"bad base": {
			base: `{"a":`, patch: `{}`,
			wantErr: "load kubelet config: merge patch: parse base: unexpected EOF",
		},
		"bad patch": {
			base: `{}`, patch: `maxPods: 3`,
			wantErr: "load kubelet config: merge patch: parse patch: invalid character 'm' looking for beginning of value",
		},
		"trailing data": {
			base: `{}`, patch: `{} {}`,
			wantErr: "load kubelet config: merge patch: parse patch: unexpected data after the JSON value",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := MergePatch([]byte(tc.base), []byte(tc.patch))
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("MergePatch() = %s, want error %q", got, tc.wantErr)
				}
				if err.Error() != tc.wantErr {
					t.Errorf("MergePatch() error:\n got: %s\nwant: %s", err, tc.wantErr)
				}
				if !errors.Is(err, ErrLoad) {
					t.Errorf("MergePatch() error does not wrap ErrLoad: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("MergePatch() error: %v", err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("MergePatch() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDropInRoundTrip runs the drop-in path end to end: a full base, a
// partial overlay that resets one field and changes another, then Decode of
// the merged result.
func TestDropInRoundTrip(t *testing.T) {
	base := []byte(header + "maxPods: 110\nreadOnlyPort: 10255\nevictionHard:\n  memory.available: 100Mi\n")
	baseJSON, _, err := DecodePartial(base, DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patch, _, err := DecodePartial([]byte(header+"maxPods: 250\nreadOnlyPort: null\n"), DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	merged, err := MergePatch(baseJSON, patch)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := Decode(merged, DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := &config{TypeMeta: typeMeta, MaxPods: 250, EvictionHard: map[string]string{"memory.available": "100Mi"}}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("merged config mismatch (-want +got):\n%s", diff)
	}
}
