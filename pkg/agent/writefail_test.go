package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/kubectl-dkc/dkc/pkg/status"
)

// errReadOnly is what the writer returns when the kubelet's config
// directory is mounted read-only.
var errReadOnly = fmt.Errorf("write kubelet config: %w", &fs.PathError{Op: "open", Path: "/var/lib/kubelet/.dkc-tmp-1", Err: syscall.EROFS})

// A failure to write the kubelet's config leaves the kubelet on its config
// and is not the config's fault: it is reported as an internal failure, the
// assignment is not recorded as failed (it used to be, with "rolled back",
// and never retried), and a later sync applies it once the write works.
func TestConfigWriteFailureIsRetriedNotRolledBack(t *testing.T) {
	e := newEnv(t)
	e.onLastKnownGood(t, "a", cfgA)
	e.configMap(t, "b", cfgB, nil)
	e.assign(t, "b")
	restartsBefore := len(e.restart.CallsSnapshot())
	probesBefore := len(e.prober.Expectations)
	e.writer.ApplyErr = errReadOnly

	for i := range 2 { // the work queue retries with backoff
		if _, err := e.a.sync(context.Background(), e.node(t), e.getter); err == nil {
			t.Fatalf("sync %d with a read-only config dir: no error, want one for the work queue to retry", i)
		}
		diff(t, "kubelet config", cfgA, string(e.writer.Current))
		diff(t, "restarts", restartsBefore, len(e.restart.CallsSnapshot()))
		diff(t, "probes", probesBefore, len(e.prober.Expectations))
		st := e.status(t)
		diff(t, "status active", ref("a", "1"), st.Active)
		diff(t, "status assigned", ref("b", "1"), st.Assigned)
		// The directory, not the random temporary: the same message on
		// every retry patches the Node once.
		for _, want := range []string{status.InternalError, "/var/lib/kubelet: read-only file system"} {
			if !strings.Contains(st.Error, want) {
				t.Errorf("status error %q does not contain %q", st.Error, want)
			}
		}
		if strings.Contains(st.Error, "rolled back") || strings.Contains(st.Error, "health gate") {
			t.Errorf("status error %q blames the config; nothing was restarted", st.Error)
		}
		diff(t, "condition", "False Failed", e.condition(t))
		rec := e.stored(t)
		if rec.Failed() || rec.ErrorSource != nil {
			t.Errorf("record marks an assignment failed: error %q source %v", rec.Error, rec.ErrorSource)
		}
		diff(t, "record active", ref("a", "1"), rec.Active)
	}

	e.writer.ApplyErr = nil
	e.sync(t)
	diff(t, "kubelet config once writable", cfgB, string(e.writer.Current))
	diff(t, "status active once writable", ref("b", "1"), e.status(t).Active)
	diff(t, "condition once writable", "True Trial", e.condition(t))
}

// An agent started with the kubelet's config directory read-only, while
// the record wants a config the file does not hold, does not exit: it
// leaves the kubelet alone, and the first syncs report and retry.
func TestStartupWithReadOnlyConfigDirRetries(t *testing.T) {
	e := newEnv(t)
	e.onLastKnownGood(t, "a", cfgA)
	e.configMap(t, "b", cfgB, nil)
	e.assign(t, "b")
	save(t, e, "b", cfgB)
	rec := e.stored(t)
	rec.Assigned = ref("b", "1") // committed, then the agent died before the write
	must(t, e.store.SetState(rec))
	e.writer.ApplyErr = errReadOnly

	e.a = e.newAgent()
	if err := e.a.startup(context.Background()); err != nil {
		t.Fatalf("startup with a read-only config dir: %v", err)
	}
	diff(t, "kubelet config after startup", cfgA, string(e.writer.Current))
	if _, err := e.a.sync(context.Background(), e.node(t), e.getter); err == nil {
		t.Fatalf("sync with a read-only config dir: no error")
	}
	diff(t, "status active", ref("a", "1"), e.status(t).Active)
	diff(t, "condition", "False Failed", e.condition(t))

	e.writer.ApplyErr = nil
	e.sync(t)
	diff(t, "kubelet config once writable", cfgB, string(e.writer.Current))
	diff(t, "condition once writable", "True Trial", e.condition(t))
}

// An agent started with the kubelet's config directory read-only, while
// the file already holds the record's target, writes nothing and starts.
func TestStartupOnTargetWritesNothing(t *testing.T) {
	e := newEnv(t)
	e.onLastKnownGood(t, "a", cfgA)
	e.writer.ApplyErr, e.writer.RestoreErr = errReadOnly, errReadOnly
	calls := len(e.writer.Calls)

	e.a = e.newAgent()
	must(t, e.a.startup(context.Background()))
	for _, c := range e.writer.Calls[calls:] {
		if c == "Apply" || c == "Restore" {
			t.Errorf("startup called %s on a kubelet config that holds its target", c)
		}
	}
	e.sync(t)
	diff(t, "condition", "True Applied", e.condition(t))
}

// A rollback whose write of the last-known-good config fails leaves the
// kubelet on the failed config: the status says so, the last-known-good
// config is not called failed, and the next sync finishes the rollback.
func TestRollbackWriteFailureIsRetried(t *testing.T) {
	e := newEnv(t)
	e.onLastKnownGood(t, "a", cfgA)
	e.configMap(t, "b", cfgB, nil)
	e.assign(t, "b")
	e.prober.Results = []error{errors.New("healthz: connection refused")}
	e.restart.OnCall = func(string) { e.writer.ApplyErr = errReadOnly } // after b is written

	if _, err := e.a.sync(context.Background(), e.node(t), e.getter); err == nil {
		t.Fatalf("sync with a rollback that cannot write: no error")
	}
	e.restart.OnCall = nil
	diff(t, "kubelet config", cfgB, string(e.writer.Current))
	st := e.status(t)
	diff(t, "status active", ref("b", "1"), st.Active)
	if !strings.Contains(st.Error, "read-only file system") || strings.Contains(st.Error, "failed too") {
		t.Errorf("status error %q: want the write failure, not the last-known-good config blamed", st.Error)
	}
	diff(t, "condition", "False Failed", e.condition(t))

	e.writer.ApplyErr = nil
	e.sync(t)
	diff(t, "kubelet config after the retry", cfgA, string(e.writer.Current))
	diff(t, "status active after the retry", ref("a", "1"), e.status(t).Active)
	diff(t, "condition after the retry", "False RolledBack", e.condition(t))
}
