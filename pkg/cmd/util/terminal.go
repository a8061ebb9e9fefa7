package util

import (
	"io"
	"os"
)

// IsTerminal reports whether w is a terminal, where progress is redrawn in
// place.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
