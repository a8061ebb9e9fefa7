// Package util holds the small pieces every dkc subcommand shares.
package util

import (
	"errors"
	"fmt"
)

// ExitError makes a command exit with Code. A nil Err exits silently, as
// diff(1) does when two inputs differ.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode is the process exit code for err: 0 for nil, the code of an
// ExitError, and 1 for anything else.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var exitErr *ExitError
	if errors.As(err, &exitErr) {
		return exitErr.Code
	}
	return 1
}

// Silent reports whether err should exit without printing a message.
func Silent(err error) bool {
	var exitErr *ExitError
	return errors.As(err, &exitErr) && exitErr.Err == nil
}
