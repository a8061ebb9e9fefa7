package framework

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Alertmanager is a real Alertmanager's alert store and v2 API
// (test/e2e/alertmanager, built from github.com/prometheus/alertmanager's
// packages), a process the test owns, serving plain HTTP on
// 127.0.0.1:PORT of the host, where the tests, the CLI and a controller run
// as host processes reach it.
type Alertmanager struct {
	// URL is its base URL, http://127.0.0.1:PORT.
	URL string
}

// AlertmanagerBinary is test/e2e/alertmanager: $DKC_ALERTMANAGER_BINARY,
// else built in tb's temporary directory.
func AlertmanagerBinary(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("DKC_ALERTMANAGER_BINARY"); p != "" {
		return p
	}
	p := filepath.Join(tb.TempDir(), "alertmanager")
	build := exec.Command("go", "build", "-o", p, "github.com/kubectl-dkc/dkc/test/e2e/alertmanager")
	if out, err := build.CombinedOutput(); err != nil {
		tb.Fatalf("build test/e2e/alertmanager: %v\n%s", err, out)
	}
	return p
}

// StartAlertmanager starts an Alertmanager on a free port of 127.0.0.1,
// waits until its API answers, and stops it when tb ends. Its log goes to
// tb's temporary directory, and into tb's log when tb fails.
func StartAlertmanager(tb testing.TB) *Alertmanager {
	tb.Helper()
	bin := AlertmanagerBinary(tb)
	port, err := freePort("127.0.0.1")
	if err != nil {
		tb.Fatal(err)
	}
	host := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	logPath := filepath.Join(tb.TempDir(), "alertmanager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "--listen-address", host)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		tb.Fatalf("start alertmanager: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited); logFile.Close() }()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if tb.Failed() {
			if out, err := os.ReadFile(logPath); err == nil {
				tb.Logf("alertmanager log:\n%s", out)
			}
		}
	})
	am := &Alertmanager{URL: "http://" + host}
	err = poll(context.Background(), 30*time.Second, func() (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("alertmanager exited")
		default:
		}
		_, err := HTTPGet(am.URL + "/api/v2/status")
		return err == nil, nil
	})
	if err != nil {
		out, _ := os.ReadFile(logPath)
		tb.Fatalf("alertmanager on %s never answered: %v\n%s", host, err, out)
	}
	return am
}

// Fire posts an alert with labels, firing from now on until resolved (or
// Alertmanager's resolve timeout, 5 minutes, passes).
func (am *Alertmanager) Fire(ctx context.Context, labels map[string]string) error {
	return am.post(ctx, map[string]any{"labels": labels, "startsAt": time.Now().UTC().Add(-time.Minute)})
}

// Resolve posts the alert with labels again, ended a second ago: it no
// longer fires.
func (am *Alertmanager) Resolve(ctx context.Context, labels map[string]string) error {
	now := time.Now().UTC()
	return am.post(ctx, map[string]any{"labels": labels, "startsAt": now.Add(-time.Minute), "endsAt": now.Add(-time.Second)})
}

// post sends alert to POST /api/v2/alerts.
func (am *Alertmanager) post(ctx context.Context, alert map[string]any) error {
	body, err := json.Marshal([]any{alert})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, am.URL+"/api/v2/alerts", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("POST %s/api/v2/alerts: %s: %s", am.URL, resp.Status, msg)
	}
	return nil
}
