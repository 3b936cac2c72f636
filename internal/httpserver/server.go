// Package httpserver serves the operational endpoints: /metrics (Prometheus),
// /healthz (the process is alive) and /readyz (every registered dependency
// check passes). Every endpoint is read-only: other methods get 405.
package httpserver

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net"
	"net/http"
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
	addr string
	log  *zap.Logger
	mux  *http.ServeMux
	h    http.Handler // what Start serves: mux, or NewHandler's handler
	ln   net.Listener
	srv  *http.Server
	errc chan error // Serve's result, once started

	mu     sync.Mutex // checks change while serving: a program starts its parts one by one
	checks map[string]Check
}

// New builds a server on addr that exposes gatherer's metrics.
func New(addr string, gatherer prometheus.Gatherer, log *zap.Logger) *Server {
	s := newServer(addr, log)
	// A GET pattern serves HEAD too and answers other methods with 405.
	s.mux.Handle("GET "+PathMetrics, promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	s.mux.HandleFunc("GET "+PathHealth, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	s.mux.HandleFunc("GET "+PathReady, s.ready)
	return s
}

// NewHandler builds a server on addr that serves h and nothing else (an API
// on its own listener).
func NewHandler(addr string, h http.Handler, log *zap.Logger) *Server {
	s := newServer(addr, log)
	s.h = h
	return s
}

func newServer(addr string, log *zap.Logger) *Server {
	s := &Server{addr: addr, log: log, mux: http.NewServeMux(), checks: map[string]Check{}}
	s.h = s.mux
	return s
}

// AddReadiness registers (or replaces) the dependency check under name, at
// any time; /readyz runs them all.
func (s *Server) AddReadiness(name string, c Check) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks[name] = c
}

// Listen binds the address now, so a bad HTTP_ADDR fails at start and tests may use ":0".
func (s *Server) Listen() (net.Addr, error) {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return nil, err
	}
	s.ln = ln
	return ln.Addr(), nil
}

// Start serves in the background from now on, so /healthz answers while a
// program still waits for something slow (a worker-ID lease); Run or Close
// stops it. Run alone starts it too.
func (s *Server) Start() error {
	if s.srv != nil {
		return nil
	}
	if s.ln == nil {
		if _, err := s.Listen(); err != nil {
			return err
		}
	}
	s.srv = &http.Server{Handler: s.h, ReadHeaderTimeout: 5 * time.Second}
	s.errc = make(chan error, 1)
	go func() { s.errc <- s.srv.Serve(s.ln) }()
	return nil
}

// Close stops a started server at once (a program that failed to start).
func (s *Server) Close() {
	if s.srv == nil {
		if s.ln != nil {
			_ = s.ln.Close()
		}
		return
	}
	_ = s.srv.Close()
	<-s.errc
	s.srv = nil
}

// Run serves until ctx ends, then shuts down gracefully within five seconds.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Start(); err != nil {
		return err
	}
	select {
	case err := <-s.errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(shutdownCtx)
	if serveErr := <-s.errc; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	s.srv = nil
	return err
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	s.mu.Lock()
	checks := maps.Clone(s.checks)
	s.mu.Unlock()
	status := map[string]string{}
	code := http.StatusOK
	for name, check := range checks {
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
