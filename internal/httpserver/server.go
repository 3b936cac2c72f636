// Package httpserver serves the operational endpoints: /metrics (Prometheus),
// /healthz (the process is alive) and /readyz (every registered dependency
// check passes). Every endpoint is read-only: other methods get 405.
package httpserver

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// Paths of the endpoints.
const (
	PathMetrics = "/metrics"
	PathHealth  = "/healthz"
	PathReady   = "/readyz"
)

// Check reports why a dependency is not ready, or nil.
type Check func(ctx context.Context) error

// Server is the operational HTTP server.
type Server struct {
	addr   string
	log    *zap.Logger
	mux    *http.ServeMux
	checks map[string]Check
	ln     net.Listener
}

// New builds a server on addr that exposes gatherer's metrics.
func New(addr string, gatherer prometheus.Gatherer, log *zap.Logger) *Server {
	s := &Server{addr: addr, log: log, mux: http.NewServeMux(), checks: map[string]Check{}}
	// A GET pattern serves HEAD too and answers other methods with 405.
	s.mux.Handle("GET "+PathMetrics, promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	s.mux.HandleFunc("GET "+PathHealth, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	s.mux.HandleFunc("GET "+PathReady, s.ready)
	return s
}

// AddReadiness registers a dependency check under name, before Run; /readyz runs them all.
func (s *Server) AddReadiness(name string, c Check) { s.checks[name] = c }

// Listen binds the address now, so a bad HTTP_ADDR fails at start and tests may use ":0".
func (s *Server) Listen() (net.Addr, error) {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return nil, err
	}
	s.ln = ln
	return ln.Addr(), nil
}

// Run serves until ctx ends, then shuts down gracefully within five seconds.
func (s *Server) Run(ctx context.Context) error {
	if s.ln == nil {
		if _, err := s.Listen(); err != nil {
			return err
		}
	}
	srv := &http.Server{Handler: s.mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if serveErr := <-errc; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	status := map[string]string{}
	code := http.StatusOK
	for name, check := range s.checks {
		status[name] = "ok"
		if err := check(ctx); err != nil {
			status[name] = err.Error()
			code = http.StatusServiceUnavailable
		}
	}
	if code != http.StatusOK {
		s.log.Debug("not ready", zap.Any("checks", status))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(status)
}
