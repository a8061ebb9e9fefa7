package status

import (
	"errors"
	"fmt"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// Exit codes of dkc commands that wait (status --wait-for, assign --wait).
const (
	// ExitOK: every node reached the condition.
	ExitOK = 0
	// ExitFailure: any other error, such as a failed API call.
	ExitFailure = 1
	// ExitConfigError: a node reported a config error for the requested
	// assignment while waiting (see ErrConfigError).
	ExitConfigError = 2
	// ExitTimeout: the timeout passed before every node reached the
	// condition (see ErrTimeout).
	ExitTimeout = 3
)

var (
	// ErrConfigError means a node reported an error in its status for the
	// config it was asked to run.
	ErrConfigError = errors.New("config error")
	// ErrTimeout means a wait ended before every node reached its condition.
	ErrTimeout = errors.New("timed out waiting for the condition")
)

// ExitCode maps the error of a wait to its exit code: ExitOK for nil,
// ExitConfigError when err matches ErrConfigError (even together with a
// timeout in an aggregate: the error is the more useful news), ExitTimeout
// when it matches ErrTimeout, else ExitFailure.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrConfigError):
		return ExitConfigError
	case errors.Is(err, ErrTimeout):
		return ExitTimeout
	default:
		return ExitFailure
	}
}

// Conditions Reached waits for.
const (
	// WaitActive: the node runs the requested config without an error.
	WaitActive = "active"
	// WaitError: the node reports an error.
	WaitError = "error"
)

// Reached reports whether item reached condition want:
//   - WaitActive is done when status.active is the requested assignment
//     (same namespace, name and key; or both nil, the local config),
//     status.error is empty, and the agent's health gate has ended (its
//     Agent is not AgentVerifying). It fails, with an error matching ErrConfigError
//     and carrying the node's error text, when status.error is set and
//     status.assigned is the request. A node without status is done only
//     when nothing is requested: it runs its local config. A status that
//     says it judged another pin than the assignment's (JudgedPin) is
//     neither: the agent has not judged the bytes pinned now.
//   - WaitError is done when status.error is set. It never fails.
//
// An unknown want is an error that does not match ErrConfigError.
func Reached(item NodeConfig, want string) (done bool, failed error) {
	st := item.Status
	switch want {
	case WaitActive:
		if st == nil {
			return item.ConfigSource == nil, nil
		}
		if item.JudgedPin != nil && !item.JudgedPin.Equal(item.Pin) {
			// A verdict on the bytes pinned before: the agent has not
			// judged the assignment as it is now.
			return false, nil
		}
		if st.Error != "" {
			if source.Equal(st.Assigned, item.ConfigSource) {
				return false, fmt.Errorf("node %q: %w: %s", item.Name, ErrConfigError, st.Error)
			}
			return false, nil
		}
		return source.Equal(st.Active, item.ConfigSource) && item.Agent != AgentVerifying, nil
	case WaitError:
		return st != nil && st.Error != "", nil
	default:
		return false, ValidateWaitFor(want)
	}
}

// ValidateWaitFor checks a condition for Reached, as given to --wait-for.
func ValidateWaitFor(want string) error {
	if want != WaitActive && want != WaitError {
		return fmt.Errorf("invalid --wait-for %q: must be %q or %q", want, WaitActive, WaitError)
	}
	return nil
}

// ReachedAll applies Reached to every item. pending lists, sorted, the nodes
// that are neither done nor failed; failed aggregates the failures. Wait
// until pending is empty or failed is set.
func ReachedAll(items []NodeConfig, want string) (pending []string, failed error) {
	if err := ValidateWaitFor(want); err != nil {
		return nil, err
	}
	var errs []error
	for _, item := range sorted(items) {
		done, err := Reached(item, want)
		switch {
		case err != nil:
			errs = append(errs, err)
		case !done:
			pending = append(pending, item.Name)
		}
	}
	return pending, utilerrors.NewAggregate(errs)
}
