package checkpoint

import (
	"bytes"
	"slices"
)

// decoded remembers the last bytes a meta file held and what they decoded
// to, so that reading an unchanged file costs its read, not its decode. The
// file stays the truth: it is read every time, and any other bytes are
// decoded afresh. The store's mutex guards it.
type decoded[T any] struct {
	data []byte
	val  T
	ok   bool
}

// get returns decode(data), from the memo when data is the bytes it holds.
// copyOf copies a value on its way out of the memo, so that callers may
// change what they get.
func (m *decoded[T]) get(data []byte, decode func([]byte) (T, error), copyOf func(T) T) (T, error) {
	if m.ok && bytes.Equal(m.data, data) {
		return copyOf(m.val), nil
	}
	v, err := decode(data)
	if err != nil {
		var zero T
		return zero, err
	}
	m.data, m.val, m.ok = slices.Clone(data), copyOf(v), true
	return v, nil
}

// set remembers that data decodes to v, which the memo then owns: a write
// of data from v primes the memo, so that the next read skips its decode.
func (m *decoded[T]) set(data []byte, v T) {
	m.data, m.val, m.ok = slices.Clone(data), v, true
}
