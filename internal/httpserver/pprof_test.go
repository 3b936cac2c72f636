package httpserver

import (
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// The pprof server serves the profiles and nothing of the ops server.
func TestPprofEndpoints(t *testing.T) {
	s := NewPprof("127.0.0.1:0", zap.NewNop())
	if code, body := get(t, s.mux, http.MethodGet, "/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "heap") {
		t.Errorf("GET /debug/pprof/ = %d %q", code, body)
	}
	if code, _ := get(t, s.mux, http.MethodGet, "/debug/pprof/heap"); code != http.StatusOK {
		t.Errorf("GET /debug/pprof/heap = %d", code)
	}
	if code, _ := get(t, s.mux, http.MethodGet, PathMetrics); code != http.StatusNotFound {
		t.Errorf("GET %s on the pprof server = %d, want 404", PathMetrics, code)
	}
}

// A handler's server serves that handler alone, none of the ops endpoints.
func TestNewHandlerServesItsHandler(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("api " + r.URL.Path)) })
	s := NewHandler("127.0.0.1:0", h, zap.NewNop())
	if code, body := get(t, s.h, http.MethodGet, "/v1/x"); code != http.StatusOK || body != "api /v1/x" {
		t.Errorf("GET /v1/x = %d %q", code, body)
	}
	if code, body := get(t, s.h, http.MethodGet, PathHealth); body != "api "+PathHealth {
		t.Errorf("GET %s = %d %q, want the handler's answer", PathHealth, code, body)
	}
}
