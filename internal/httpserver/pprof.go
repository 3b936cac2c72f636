package httpserver

import (
	"net/http/pprof"

	"go.uber.org/zap"
)

// NewPprof builds a server on addr with net/http/pprof's handlers under
// /debug/pprof/ and nothing else. It is meant for its own, private address:
// a CPU profile costs the process while it runs.
func NewPprof(addr string, log *zap.Logger) *Server {
	s := newServer(addr, log)
	s.mux.HandleFunc("/debug/pprof/", pprof.Index)
	s.mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	s.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	s.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	s.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return s
}
