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
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
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
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
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
