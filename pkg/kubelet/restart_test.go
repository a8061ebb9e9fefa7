package kubelet

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestExecRestarter(t *testing.T) {
	tests := map[string]struct {
		r       *ExecRestarter
		op      func(r *ExecRestarter, ctx context.Context) error
		wantErr string
	}{
		"restart succeeds": {
			r:  NewExecRestarter([]string{"sh", "-c", "echo restarted"}, 5*time.Second),
			op: (*ExecRestarter).Restart,
		},
		"restart exits non-zero": {
			r:       NewExecRestarter([]string{"sh", "-c", "echo stopping; echo kubelet did not start >&2; exit 3"}, 5*time.Second),
			op:      (*ExecRestarter).Restart,
			wantErr: `restart kubelet: "sh -c echo stopping; echo kubelet did not start >&2; exit 3": exit status 3: stopping` + "\nkubelet did not start",
		},
		"restart command missing": {
			r:       NewExecRestarter([]string{"/nonexistent/restart-kubelet"}, 5*time.Second),
			op:      (*ExecRestarter).Restart,
			wantErr: `restart kubelet: "/nonexistent/restart-kubelet": fork/exec /nonexistent/restart-kubelet: no such file or directory`,
		},
		"no restart command": {
			r:       NewExecRestarter(nil, 5*time.Second),
			op:      (*ExecRestarter).Restart,
			wantErr: "exec restarter: no --restart-command configured",
		},
		"no stop command": {
			r:       NewExecRestarter([]string{"true"}, 5*time.Second),
			op:      (*ExecRestarter).Stop,
			wantErr: "exec restarter: no --stop-command configured",
		},
		"no start command": {
			r:       NewExecRestarter([]string{"true"}, 5*time.Second),
			op:      (*ExecRestarter).Start,
			wantErr: "exec restarter: no --start-command configured",
		},
		"stop and start commands": {
			r: &ExecRestarter{StopCommand: []string{"true"}, StartCommand: []string{"false"}, Timeout: 5 * time.Second},
			op: func(r *ExecRestarter, ctx context.Context) error {
				if err := r.Stop(ctx); err != nil {
					return err
				}
				return r.Start(ctx)
			},
			wantErr: `start kubelet: "false": exit status 1`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.op(tc.r, context.Background())
			if got := errString(err); got != tc.wantErr {
				t.Errorf("error = %q, want %q", got, tc.wantErr)
			}
		})
	}
}

// TestExecRestarterTimeout proves a command that outlives its timeout fails
// the call, and that it and what it started are killed.
func TestExecRestarterTimeout(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	r := NewExecRestarter([]string{"sh", "-c", `echo waiting; sleep 60 & echo $! > "$0"; wait`, pidFile}, 300*time.Millisecond)
	began := time.Now()
	err := r.Restart(context.Background())
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("Restart took %s, want it to end soon after its 300ms timeout", took)
	}
	want := `restart kubelet: "sh -c echo waiting; sleep 60 & echo $! > \"$0\"; wait ` + pidFile + `": timed out after 300ms: waiting`
	if got := errString(err); got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
}

func TestExecRestarterCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	err := NewExecRestarter([]string{"sleep", "60"}, time.Minute).Restart(ctx)
	if got, want := errString(err), `restart kubelet: "sleep 60": context canceled`; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error does not wrap context.Canceled")
	}
}

// waitGone waits until process pid is gone or a zombie (whose parent may
// not be ours to reap).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		// The state follows the parenthesised command name.
		if s := string(stat); strings.HasPrefix(s[strings.LastIndex(s, ")")+2:], "Z") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs after the timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fakeUnits is a unitManager whose jobs end with a scripted result; an
// empty result means the job never finishes.
type fakeUnits struct {
	mu      sync.Mutex
	result  string
	err     error
	calls   []string
	closed  int
	pending []chan<- string
}

func (f *fakeUnits) enqueue(method string, name, mode string, ch chan<- string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, method+" "+name+" "+mode)
	if f.err != nil {
		return 0, f.err
	}
	if f.result == "" {
		f.pending = append(f.pending, ch)
		return 7, nil
	}
	// systemd answers later, from the connection's own goroutine.
	go func() { ch <- f.result }()
	return 7, nil
}

func (f *fakeUnits) RestartUnitContext(_ context.Context, name, mode string, ch chan<- string) (int, error) {
	return f.enqueue("restart", name, mode, ch)
}

func (f *fakeUnits) StopUnitContext(_ context.Context, name, mode string, ch chan<- string) (int, error) {
	return f.enqueue("stop", name, mode, ch)
}

func (f *fakeUnits) StartUnitContext(_ context.Context, name, mode string, ch chan<- string) (int, error) {
	return f.enqueue("start", name, mode, ch)
}

func (f *fakeUnits) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed++
}

func TestSystemdRestarter(t *testing.T) {
	tests := map[string]struct {
		units      *fakeUnits
		connectErr error
		op         func(r *SystemdRestarter, ctx context.Context) error
		wantCalls  []string
		wantErr    string
	}{
		"restart done": {
			units:     &fakeUnits{result: "done"},
			op:        (*SystemdRestarter).Restart,
			wantCalls: []string{"restart kubelet.service replace"},
		},
		"stop done": {
			units:     &fakeUnits{result: "done"},
			op:        (*SystemdRestarter).Stop,
			wantCalls: []string{"stop kubelet.service replace"},
		},
		"start done": {
			units:     &fakeUnits{result: "done"},
			op:        (*SystemdRestarter).Start,
			wantCalls: []string{"start kubelet.service replace"},
		},
		"restart failed": {
			units:     &fakeUnits{result: "failed"},
			op:        (*SystemdRestarter).Restart,
			wantCalls: []string{"restart kubelet.service replace"},
			wantErr:   "restart unit kubelet.service: job failed",
		},
		"start dependency": {
			units:     &fakeUnits{result: "dependency"},
			op:        (*SystemdRestarter).Start,
			wantCalls: []string{"start kubelet.service replace"},
			wantErr:   "start unit kubelet.service: job dependency",
		},
		"restart never answers": {
			units:     &fakeUnits{},
			op:        (*SystemdRestarter).Restart,
			wantCalls: []string{"restart kubelet.service replace"},
			wantErr:   "restart unit kubelet.service: job did not finish within 200ms",
		},
		"enqueue refused": {
			units:     &fakeUnits{err: errors.New("Unit kubelet.service not found.")},
			op:        (*SystemdRestarter).Stop,
			wantCalls: []string{"stop kubelet.service replace"},
			wantErr:   "stop unit kubelet.service: Unit kubelet.service not found.",
		},
		"no systemd": {
			connectErr: errors.New("dial unix /run/systemd/private: connect: no such file or directory"),
			op:         (*SystemdRestarter).Restart,
			wantErr:    "restart unit kubelet.service: connect to systemd: dial unix /run/systemd/private: connect: no such file or directory",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := NewSystemdRestarter("kubelet.service", 200*time.Millisecond)
			r.connect = func(context.Context) (unitManager, error) {
				if tc.connectErr != nil {
					return nil, tc.connectErr
				}
				return tc.units, nil
			}
			err := tc.op(r, context.Background())
			if got := errString(err); got != tc.wantErr {
				t.Errorf("error = %q, want %q", got, tc.wantErr)
			}
			if tc.units == nil {
				return
			}
			tc.units.mu.Lock()
			defer tc.units.mu.Unlock()
			if diff := cmp.Diff(tc.wantCalls, tc.units.calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if tc.units.closed != 1 {
				t.Errorf("connection closed %d times, want 1", tc.units.closed)
			}
		})
	}
}

// Queued runs after systemd accepted the job and before the restarter waits
// for its result; a job systemd refused never calls it.
func TestSystemdRestarterQueued(t *testing.T) {
	tests := map[string]struct {
		units     *fakeUnits
		wantCalls []string
		wantErr   string
	}{
		"job done": {
			units:     &fakeUnits{result: "done"},
			wantCalls: []string{"restart kubelet.service replace", "queued"},
		},
		"job never finishes": {
			units:     &fakeUnits{},
			wantCalls: []string{"restart kubelet.service replace", "queued"},
			wantErr:   "restart unit kubelet.service: job did not finish within 200ms",
		},
		"job refused": {
			units:     &fakeUnits{err: errors.New("Unit kubelet.service not found.")},
			wantCalls: []string{"restart kubelet.service replace"},
			wantErr:   "restart unit kubelet.service: Unit kubelet.service not found.",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := NewSystemdRestarter("kubelet.service", 200*time.Millisecond)
			r.connect = func(context.Context) (unitManager, error) { return tc.units, nil }
			r.Queued = func() {
				tc.units.mu.Lock()
				defer tc.units.mu.Unlock()
				tc.units.calls = append(tc.units.calls, "queued")
			}
			err := r.Restart(context.Background())
			if got := errString(err); got != tc.wantErr {
				t.Errorf("error = %q, want %q", got, tc.wantErr)
			}
			tc.units.mu.Lock()
			defer tc.units.mu.Unlock()
			if diff := cmp.Diff(tc.wantCalls, tc.units.calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}
