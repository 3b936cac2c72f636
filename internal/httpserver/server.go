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
	"sort"
	"sync"
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
	mu     sync.RWMutex
	checks map[string]Check
	ln     net.Listener
}

// New builds a server on addr that exposes gatherer's metrics.
func New(addr string, gatherer prometheus.Gatherer, log *zap.Logger) *Server {
	s := &Server{addr: addr, log: log, mux: http.NewServeMux(), checks: map[string]Check{}}
	s.mux.Handle(PathMetrics, readOnly(promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{})))
	s.mux.Handle(PathHealth, readOnly(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})))
	s.mux.Handle(PathReady, readOnly(http.HandlerFunc(s.ready)))
	return s
}

// AddReadiness registers a dependency check under name; /readyz runs them all.
func (s *Server) AddReadiness(name string, c Check) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks[name] = c
}

// Handler is the server's handler, for tests.
func (s *Server) Handler() http.Handler { return s.mux }

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
	s.mu.RLock()
	names := make([]string, 0, len(s.checks))
	for n := range s.checks {
		names = append(names, n)
	}
	checks := s.checks
	s.mu.RUnlock()
	sort.Strings(names)
	status := map[string]string{}
	code := http.StatusOK
	for _, n := range names {
		if err := checks[n](ctx); err != nil {
			status[n] = err.Error()
			code = http.StatusServiceUnavailable
		} else {
			status[n] = "ok"
		}
	}
	if code != http.StatusOK {
		s.log.Debug("not ready", zap.Any("checks", status))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(status)
}

func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "read-only endpoint", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}
