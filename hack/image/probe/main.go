// Command probe is the readiness-probe target of kubectl-dkc's test
// clusters: a tiny HTTP server for a pod with an httpGet readiness probe.
//
//	GET  /readyz   200 "ok" while ready, 503 "not ready" after POST /fail
//	GET  /healthz  200 "ok" always (for a liveness probe)
//	POST /fail     /readyz answers 503 from now on
//	POST /ok       /readyz answers 200 again
//
// It listens on -listen (default $PROBE_LISTEN, else ":8080"), starts ready,
// and exits 0 on SIGTERM or SIGINT, as PID 1 of its container.
//
// With -processes N it first starts N processes of its own (itself, with
// -child, each holding until its parent ends) and serves only once every
// one of them runs; it exits 1 when one cannot start (such as fork's
// EAGAIN under a pod's pids limit). The dkc agent's probe pod runs it so,
// so that a pod started after a kubelet restart is Ready only if it could
// create processes (docs/agent.md, "The new-pod check").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	def := os.Getenv("PROBE_LISTEN")
	if def == "" {
		def = ":8080"
	}
	listen := flag.String("listen", def, "The address to serve on, as host:port (default $PROBE_LISTEN, else :8080).")
	processes := flag.Int("processes", 0, "Start this many processes of its own before serving; exit 1 if one cannot start.")
	child := flag.Bool("child", false, "Run as one of -processes: say so on stdout, then hold until stdin closes (the parent ended).")
	flag.Parse()
	if *child {
		runChild(os.Stdin, os.Stdout)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if *processes > 0 {
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		children, err := startChildren(self, *processes)
		if err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		defer stopChildren(children)
		log.Printf("probe: %d processes of its own run", len(children))
	}
	if err := serve(ctx, *listen); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// serve answers on addr until ctx ends.
func serve(ctx context.Context, addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	log.Printf("probe: serving /readyz on %s", l.Addr())
	srv := &http.Server{Handler: newHandler(), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// newHandler serves the endpoints of the package comment; it starts ready.
func newHandler() http.Handler {
	var failing atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if failing.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("POST /fail", func(w http.ResponseWriter, _ *http.Request) {
		failing.Store(true)
		log.Print("probe: /readyz fails from now on")
		fmt.Fprintln(w, "failing")
	})
	mux.HandleFunc("POST /ok", func(w http.ResponseWriter, _ *http.Request) {
		failing.Store(false)
		log.Print("probe: /readyz passes from now on")
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// child is one process startChildren started: its stdin, whose closing
// ends it.
type child struct {
	cmd   *exec.Cmd
	stdin io.Closer
}

// runChild says "up" on out once it runs, then holds until in closes,
// which happens when the parent ends, however it ends.
func runChild(in io.Reader, out io.Writer) {
	fmt.Fprintln(out, "up")
	_, _ = io.Copy(io.Discard, in)
}

// startChildren starts n processes of self with -child and returns once
// each said it runs; on the first that does not, it ends the others and
// says why.
func startChildren(self string, n int) ([]child, error) {
	var children []child
	for i := range n {
		// A child's stderr is dropped: a Go runtime that cannot make a
		// thread dumps its stacks there, and the probe's own last line
		// (main's "error: ...") is what a terminated container's message
		// should end with.
		cmd := exec.Command(self, "-child")
		stdin, err := cmd.StdinPipe()
		if err == nil {
			var stdout io.ReadCloser
			if stdout, err = cmd.StdoutPipe(); err == nil {
				if err = cmd.Start(); err == nil {
					children = append(children, child{cmd: cmd, stdin: stdin})
					buf := make([]byte, 3)
					if _, rerr := io.ReadFull(stdout, buf); rerr != nil || string(buf) != "up\n" {
						_ = stdin.Close()
						children = children[:len(children)-1]
						err = fmt.Errorf("it did not say it runs (%v)", cmd.Wait())
					}
				}
			}
		}
		if err != nil {
			stopChildren(children)
			return nil, fmt.Errorf("start process %d of %d: %w", i+1, n, err)
		}
	}
	return children, nil
}

// stopChildren closes each child's stdin and waits for it.
func stopChildren(children []child) {
	for _, c := range children {
		_ = c.stdin.Close()
	}
	for _, c := range children {
		_ = c.cmd.Wait()
	}
}
