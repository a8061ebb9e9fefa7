package framework

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A forwarder copies the TCP connections it accepts, on listeners inside
// nodes' network namespaces, to one address in the host's network
// namespace. The harness uses it where a node must reach a service of the
// host's at a fixed address: the registry on 127.0.0.1:PORT (registry.go),
// and, on kubeadm nodes, the apiserver at the kubernetes Service's
// ClusterIP, which kube-proxy would route on a real node (kubeadm.go).
type forwarder struct {
	target string // host:port in the host's network namespace
	logf   func(string, ...any)

	mu        sync.Mutex
	listeners []net.Listener
	conns     sync.WaitGroup
}

func newForwarder(target string, logf func(string, ...any)) *forwarder {
	return &forwarder{target: target, logf: logf}
}

// listen opens a listener on addr inside netns and forwards every
// connection it accepts to the target, until stop.
func (f *forwarder) listen(netns, addr string) error {
	l, err := listenInNetNS(netns, addr)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.listeners = append(f.listeners, l)
	f.mu.Unlock()
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return // closed by stop
			}
			f.conns.Add(1)
			go func() {
				defer f.conns.Done()
				f.proxy(in)
			}()
		}
	}()
	return nil
}

// stop closes the listeners and waits until every forwarded connection is
// closed.
func (f *forwarder) stop() {
	f.mu.Lock()
	for _, l := range f.listeners {
		_ = l.Close()
	}
	f.listeners = nil
	f.mu.Unlock()
	f.conns.Wait()
}

// proxy copies in to a new connection to the target and back, each
// direction until its EOF.
func (f *forwarder) proxy(in net.Conn) {
	defer in.Close()
	out, err := net.DialTimeout("tcp", f.target, 10*time.Second)
	if err != nil {
		f.logf("forwarder to %s: %v", f.target, err)
		return
	}
	defer out.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(out, in)
		_ = out.(*net.TCPConn).CloseWrite()
	}()
	_, _ = io.Copy(in, out)
	_ = in.(*net.TCPConn).CloseWrite()
	<-done
}

// listenInNetNS opens a TCP listener on addr inside the named network
// namespace (/run/netns/NAME). The socket stays in that namespace; only
// the thread that creates it enters the namespace, and leaves it again.
func listenInNetNS(netns, addr string) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// A thread that cannot return to the host's namespace stays
		// locked, so Go ends it with this goroutine.
		runtime.LockOSThread()
		host, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer host.Close()
		target, err := os.Open(filepath.Join("/run/netns", netns))
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer target.Close()
		if err := setns(target); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("setns %s: %w", netns, err)}
			return
		}
		l, lerr := net.Listen("tcp", addr)
		if err := setns(host); err != nil {
			if l != nil {
				l.Close()
			}
			ch <- result{err: fmt.Errorf("setns back to the host's netns: %w", err)}
			return
		}
		runtime.UnlockOSThread()
		ch <- result{l, lerr}
	}()
	r := <-ch
	return r.l, r.err
}

func setns(f *os.File) error { return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET) }
