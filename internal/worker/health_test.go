package worker

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// A worker whose worker ID is held by another live pod waits for the lease
// (up to two TTLs). Meanwhile /healthz answers, so liveness does not kill it,
// and /readyz says what it waits for; a stop during the wait frees the port.
func TestHealthServedDuringLeaseWait(t *testing.T) {
	g := newRig(t, 1)
	g.start(1, Options{NoHTTP: true}) // holds worker ID 1

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := g.config(1)
	cfg.HTTPAddr = addr
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		w, err := New(ctx, cfg, zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)), Options{})
		if err == nil {
			w.close()
		}
		done <- err
	}()

	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if code, _ := get("/healthz"); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/healthz never answered during the lease wait")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "waiting for the worker-ID lease") {
		t.Errorf("/readyz during the wait: %d %s", code, body)
	}
	select {
	case err := <-done:
		t.Fatalf("New returned while the ID is held: %v", err)
	default:
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("New succeeded although its ID is held")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("New did not return after cancel")
	}
	if ln, err := net.Listen("tcp", addr); err != nil {
		t.Errorf("the port is still bound after a failed start: %v", err)
	} else {
		ln.Close()
	}
}
