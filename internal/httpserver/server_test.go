package httpserver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func get(t *testing.T, h http.Handler, method, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Code, rec.Body.String()
}

func TestEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "billing_test_total", Help: "t"})
	reg.MustRegister(c)
	c.Add(3)
	s := New(":0", reg, zap.NewNop())
	failing := errors.New("redis: connection refused")
	var redisErr error
	s.AddReadiness("redis", func(context.Context) error { return redisErr })
	s.AddReadiness("mysql", func(context.Context) error { return nil })

	if code, body := get(t, s.mux, "GET", PathHealth); code != 200 || body != "ok\n" {
		t.Fatalf("healthz %d %q", code, body)
	}
	if code, body := get(t, s.mux, "GET", PathMetrics); code != 200 || !strings.Contains(body, "billing_test_total 3") {
		t.Fatalf("metrics %d %q", code, body)
	}
	if code, body := get(t, s.mux, "GET", PathReady); code != 200 || !strings.Contains(body, `"redis":"ok"`) {
		t.Fatalf("readyz %d %q", code, body)
	}
	redisErr = failing
	code, body := get(t, s.mux, "GET", PathReady)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "connection refused") || !strings.Contains(body, `"mysql":"ok"`) {
		t.Fatalf("readyz while failing %d %q", code, body)
	}
	for _, m := range []string{"POST", "PUT", "DELETE"} {
		if code, _ := get(t, s.mux, m, PathMetrics); code != http.StatusMethodNotAllowed {
			t.Errorf("%s /metrics = %d, want 405", m, code)
		}
	}
}

func TestRunServesAndStops(t *testing.T) {
	s := New("127.0.0.1:0", prometheus.NewRegistry(), zap.NewNop())
	addr, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	resp, err := http.Get("http://" + addr.String() + PathHealth)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok\n" {
		t.Fatalf("body %q", b)
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(6 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestListenRejectsBadAddr(t *testing.T) {
	if _, err := New("not-an-addr", prometheus.NewRegistry(), zap.NewNop()).Listen(); err == nil {
		t.Fatal("no error for a bad address")
	}
}

// A program starts serving before its slow parts exist and registers their
// checks as they come (the race detector watches), then Close stops it.
func TestStartBeforeChecksThenClose(t *testing.T) {
	s := New("127.0.0.1:0", prometheus.NewRegistry(), zap.NewNop())
	s.AddReadiness("idgen_lease", func(context.Context) error { return errors.New("waiting for the worker-ID lease") })
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	base := "http://" + s.ln.Addr().String()
	status := func(path string) int {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status(PathHealth); got != 200 {
		t.Fatalf("healthz while starting: %d", got)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 20 {
			status(PathReady)
		}
	}()
	if got := status(PathReady); got != http.StatusServiceUnavailable {
		t.Errorf("readyz while waiting: %d, want 503", got)
	}
	s.AddReadiness("idgen_lease", func(context.Context) error { return nil })
	<-done
	if got := status(PathReady); got != 200 {
		t.Errorf("readyz once the lease is held: %d", got)
	}
	http.DefaultClient.CloseIdleConnections()
	s.Close()
	if _, err := http.Get(base + PathHealth); err == nil {
		t.Error("still serving after Close")
	}
}
