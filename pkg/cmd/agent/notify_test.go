package agent

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"

	kfake "github.com/kubectl-dkc/dkc/pkg/kubelet/fake"
)

// The agent speaks sd_notify on $NOTIFY_SOCKET, as systemd sets it for a
// Type=notify unit: STATUS= lines, and READY=1 once however often ready is
// called (after start-up, and as each kubelet job is queued).
func TestReadinessNotifySocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", path)

	r := newReadiness(klog.Background())
	r.status("Putting the checkpointed kubelet config in place")
	r.ready()
	r.ready()
	r.status("done")

	var got []string
	buf := make([]byte, 4096)
	for {
		if err := conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		n, err := conn.Read(buf)
		if err != nil {
			break
		}
		got = append(got, string(buf[:n]))
	}
	want := []string{
		"STATUS=Putting the checkpointed kubelet config in place",
		"READY=1\nSTATUS=Kubelet config in place; watching the node and its assigned ConfigMap",
		"STATUS=done",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("datagrams on $NOTIFY_SOCKET (-want +got):\n%s", diff)
	}
}

// Outside a Type=notify unit (a DaemonSet's pod, a shell) there is no
// $NOTIFY_SOCKET, and ready sends nothing and fails nothing.
func TestReadinessWithoutNotifySocket(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	r := newReadiness(klog.Background())
	var sent []bool
	notify := r.notify
	r.notify = func(state string) (bool, error) {
		ok, err := notify(state)
		if err != nil {
			t.Errorf("notify %q: %v", state, err)
		}
		sent = append(sent, ok)
		return ok, err
	}
	r.ready()
	if diff := cmp.Diff([]bool{false}, sent); diff != "" {
		t.Errorf("sent (-want +got):\n%s", diff)
	}
}

// readyFirst calls ready before each job of the restarter it wraps.
func TestReadyFirst(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	record := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, s)
	}
	fr := &kfake.FakeRestarter{OnCall: record}
	r := readyFirst{Restarter: fr, ready: func() { record("ready") }}
	ctx := context.Background()
	for _, job := range []func(context.Context) error{r.Restart, r.Stop, r.Start} {
		if err := job(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"ready", "Restart", "ready", "Stop", "ready", "Start"}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}
