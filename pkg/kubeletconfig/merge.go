package kubeletconfig

import (
	"encoding/json"
	"fmt"
	"strings"
)

// MergePatch applies patch to base as an RFC 7386 JSON merge patch and
// returns the merged JSON: objects merge key by key, a null value deletes
// its key, and anything else (lists, scalars) replaces what was there. This
// is how the kubelet combines --config-dir drop-ins with --config.
// Both inputs are JSON (DecodePartial returns a drop-in as JSON). Errors
// wrap ErrLoad.
func MergePatch(base, patch []byte) ([]byte, error) {
	b, err := decodeJSON(base)
	if err != nil {
		return nil, fmt.Errorf("%w: merge patch: parse base: %w", ErrLoad, err)
	}
	p, err := decodeJSON(patch)
	if err != nil {
		return nil, fmt.Errorf("%w: merge patch: parse patch: %w", ErrLoad, err)
	}
	out, err := marshalJSON(mergeValue(b, p))
	if err != nil {
		return nil, fmt.Errorf("%w: merge patch: %w", ErrLoad, err)
	}
	return out, nil
}

// mergeValue is RFC 7386's MergePatch(Target, Patch).
func mergeValue(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = mergeValue(t[k], v)
	}
	return t
}

// marshalJSON marshals v without escaping <, > and &.
func marshalJSON(v any) ([]byte, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return []byte(strings.TrimSuffix(b.String(), "\n")), nil
}
