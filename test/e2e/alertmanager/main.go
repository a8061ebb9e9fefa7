// Command alertmanager is the Alertmanager the e2e tests run: Alertmanager's
// own alert store (provider/mem), silences (silence) and HTTP API (api,
// v2 under /api/v2/), put together as its cmd/alertmanager puts them, less
// the web UI (whose embedded app/dist its module does not ship, so that
// cmd/alertmanager does not build from the module), clustering, the
// notification pipeline (the dispatcher: GET /api/v2/alerts/groups
// answers no group) and persistence. It routes every alert to one
// receiver that notifies no one. It listens on a loopback address only.
//
//	alertmanager --listen-address 127.0.0.1:9093
//
// framework.StartAlertmanager builds and runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/alertmanager/api"
	"github.com/prometheus/alertmanager/config"
	"github.com/prometheus/alertmanager/dispatch"
	"github.com/prometheus/alertmanager/eventrecorder"
	"github.com/prometheus/alertmanager/featurecontrol"
	"github.com/prometheus/alertmanager/labelset"
	"github.com/prometheus/alertmanager/provider/mem"
	"github.com/prometheus/alertmanager/silence"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/route"
)

// conf routes every alert to a receiver with no integration.
const conf = `route:
  receiver: "null"
receivers:
- name: "null"
`

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen-address", "127.0.0.1:9093", "Loopback host:port to serve the API on.")
	flag.Parse()
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return fmt.Errorf("--listen-address %q: %w", *listen, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--listen-address %q: want a loopback IP address, such as 127.0.0.1", *listen)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	reg := prometheus.NewRegistry()
	recorder := eventrecorder.NopRecorder()
	silences, err := silence.New(silence.Options{Retention: time.Hour, Logger: logger, Metrics: reg, EventRecorder: recorder})
	if err != nil {
		return fmt.Errorf("silences: %w", err)
	}
	silencer := silence.NewSilencer(silences, logger, recorder)
	alerts, err := mem.NewAlerts(ctx, 30*time.Minute, 0, silencer, logger, recorder, reg, featurecontrol.NoopFlags{})
	if err != nil {
		return fmt.Errorf("alert store: %w", err)
	}
	defer alerts.Close()

	cfg, err := config.Load(conf)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	noGroups := func(context.Context, func(*dispatch.Route) bool, dispatch.AlertFilter) (dispatch.AlertGroups, map[model.Fingerprint][]string, error) {
		return nil, nil, nil
	}
	apih, err := api.New(api.Options{Alerts: alerts, Silences: silences, GroupFunc: noGroups, Timeout: time.Minute, Logger: logger, Registry: reg,
		RequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "alertmanager_http_request_duration_seconds", Help: "Latencies of HTTP requests."}, []string{"handler", "method", "code"})})
	if err != nil {
		return fmt.Errorf("API: %w", err)
	}
	apih.Update(cfg, func(ctx context.Context, lset labelset.LabelSet) { silencer.Mutes(ctx, lset) })
	mux := apih.Register(route.New(), "/")

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	fmt.Fprintf(os.Stderr, "alertmanager: serving the v2 API on http://%s/api/v2/\n", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
