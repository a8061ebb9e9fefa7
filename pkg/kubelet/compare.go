package kubelet

import (
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// CompareConfig compares the fields a wanted KubeletConfiguration sets with
// the kubelet's running config from configz (its .kubeletconfig object), both
// JSON or YAML, and lists the differences as "PATH is GOT, want WANT", sorted
// by path. It is what Probe checks.
//
// Configz shows flags merged over the config files, with defaults filled in,
// so only fields present in want are compared, and kind and apiVersion never
// are (configz has them only from 1.36). A null in want is skipped, and so is
// a zero number, an empty string or a zero duration ("0s"): the kubelet's
// defaulting takes a zero in its non-pointer fields for unset and fills in
// the default, so kubeadm's config.yaml, which writes every duration it
// leaves to the kubelet as 0s, runs with "2m0s" where it says "0s". False
// is compared: the kubelet's booleans are pointers, kept as given. A field
// configz omits matches a zero value (0, "", false, [], {}), as configz omits
// empty fields. Numbers compare numerically; strings compare as durations when
// both parse as one ("1m0s" equals "60s"), else as resource quantities when
// both parse as one ("1Gi" equals "1024Mi"); lists compare element by element.
func CompareConfig(want, got []byte) ([]string, error) {
	w, err := decodeGeneric(want)
	if err != nil {
		return nil, fmt.Errorf("compare config: want: %w", err)
	}
	g, err := decodeGeneric(got)
	if err != nil {
		return nil, fmt.Errorf("compare config: got: %w", err)
	}
	return compareConfig(w, g), nil
}

func compareConfig(want, got map[string]any) []string {
	w := make(map[string]any, len(want))
	for k, v := range want {
		if k != "kind" && k != "apiVersion" {
			w[k] = v
		}
	}
	var out []string
	compareMap("", w, got, &out)
	return out
}

func compareMap(path string, want, got map[string]any, out *[]string) {
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		compareValue(joinPath(path, k), want[k], got[k], out)
	}
}

func compareValue(path string, want, got any, out *[]string) {
	switch {
	case want == nil, isUnset(want):
		return
	case got == nil:
		if !isZero(want) {
			*out = append(*out, fmt.Sprintf("%s is not set, want %s", path, render(want)))
		}
		return
	}
	if wm, ok := want.(map[string]any); ok {
		if gm, ok := got.(map[string]any); ok {
			compareMap(path, wm, gm, out)
			return
		}
	}
	if !equalValue(want, got) {
		*out = append(*out, fmt.Sprintf("%s is %s, want %s", path, render(got), render(want)))
	}
}

// equalValue reports whether got shows want; see CompareConfig.
func equalValue(want, got any) bool {
	switch w := want.(type) {
	case nil:
		return true
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return got == nil && isZero(w)
		}
		var out []string
		compareMap("", w, g, &out)
		return len(out) == 0
	case []any:
		g, ok := got.([]any)
		if !ok {
			return got == nil && len(w) == 0
		}
		if len(w) != len(g) {
			return false
		}
		for i := range w {
			if !equalValue(w[i], g[i]) {
				return false
			}
		}
		return true
	case json.Number:
		g, ok := got.(json.Number)
		if !ok {
			return false
		}
		wr, ok1 := new(big.Rat).SetString(w.String())
		gr, ok2 := new(big.Rat).SetString(g.String())
		if !ok1 || !ok2 {
			return w == g
		}
		return wr.Cmp(gr) == 0
	case string:
		g, ok := got.(string)
		if !ok {
			return false
		}
		if w == g {
			return true
		}
		wd, err1 := time.ParseDuration(w)
		gd, err2 := time.ParseDuration(g)
		if err1 == nil && err2 == nil {
			return wd == gd
		}
		if err1 == nil || err2 == nil {
			return false
		}
		wq, err1 := resource.ParseQuantity(w)
		gq, err2 := resource.ParseQuantity(g)
		return err1 == nil && err2 == nil && wq.Cmp(gq) == 0
	case bool:
		g, ok := got.(bool)
		return ok && w == g
	}
	return false
}

// isUnset reports whether a field's wanted value is one the kubelet's
// defaulting replaces: 0, "" or a zero duration.
func isUnset(v any) bool {
	switch v := v.(type) {
	case json.Number:
		r, ok := new(big.Rat).SetString(v.String())
		return ok && r.Sign() == 0
	case string:
		if v == "" {
			return true
		}
		d, err := time.ParseDuration(v)
		return err == nil && d == 0
	}
	return false
}

// isZero reports whether v is what configz omits: 0, "", false, [] or {}.
func isZero(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case json.Number:
		r, ok := new(big.Rat).SetString(v.String())
		return ok && r.Sign() == 0
	case string:
		return v == ""
	case bool:
		return !v
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

func render(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// joinPath appends key to path, as a.b, or a["b.c"] for a key that is not
// a plain identifier.
func joinPath(path, key string) string {
	plain := key != ""
	for _, r := range key {
		if !(r == '_' || r == '-' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') {
			plain = false
			break
		}
	}
	switch {
	case !plain:
		return path + "[" + strconv.Quote(key) + "]"
	case path == "":
		return key
	default:
		return path + "." + key
	}
}
