package util

import "errors"

// ErrTimeoutWithoutWait refuses --timeout given without --wait, which is
// all it bounds.
var ErrTimeoutWithoutWait = errors.New("--timeout has no effect without --wait: add --wait, or drop --timeout")
