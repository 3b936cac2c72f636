// Package adminapi is the read API of a merchant's quota: its balance as MySQL,
// Redis and the in-flight deductions see it, its ledger in cursor pages, and
// one event's fate across the ledger, the DLQ and the outbox.
// Every request needs the bearer token of a file; one token bucket bounds what
// all callers together cost the databases. Nothing here writes: only GET and
// HEAD are served, other methods get 405. The contract is api/openapi.yaml.
package adminapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/ledger"
)

// Balances reads a merchant's balance (implemented by *deduct.Deductor: the
// view billingctl quota show prints).
type Balances interface {
	Show(ctx context.Context, merchantID string) (deduct.View, error)
}

// Ledger reads ledger pages (implemented by *ledgerdb.Store).
type Ledger interface {
	Balances(ctx context.Context, merchantIDs []string) (map[string]ledger.Balance, error)
	MerchantRows(ctx context.Context, merchantID string, after int64, limit int) ([]ledger.Row, error)
}

// EventLookup finds what is known of an event (implemented by *Events).
type EventLookup interface {
	Show(ctx context.Context, eventID string) (EventView, error)
}

// Options configure the API.
type Options struct {
	TokenFile string  // holds the bearer token
	Rate      float64 // requests per second, all callers together
	Burst     int
}

// route is one documented path; every route answers GET and HEAD.
type route struct {
	path   string
	handle func(*API, http.ResponseWriter, *http.Request)
}

// routes are the API's paths, as api/openapi.yaml documents them.
func routes() []route {
	return []route{
		{"/v1/merchants/{id}/balance", (*API).balance},
		{"/v1/merchants/{id}/ledger", (*API).ledgerPage},
		{"/v1/events/{id}", (*API).event},
	}
}

// otherRoute labels requests that match no route.
const otherRoute = "other"

// API serves the read API.
type API struct {
	balances Balances
	ledger   Ledger
	events   EventLookup
	log      *zap.Logger
	metrics  *Metrics
	token    *tokenFile
	limiter  *rate.Limiter
	mux      *http.ServeMux
}

// New builds the API (log and m may be nil); it reads the token file now, and an
// unreadable one is an error.
func New(b Balances, l Ledger, ev EventLookup, opts Options, log *zap.Logger, m *Metrics) (*API, error) {
	if opts.Rate <= 0 || opts.Burst < 1 {
		return nil, errors.New("adminapi: rate and burst must be positive")
	}
	if log == nil {
		log = zap.NewNop()
	}
	if m == nil {
		m, _ = NewMetrics(nil) // with no registry it cannot fail
	}
	token, err := newTokenFile(opts.TokenFile, log)
	if err != nil {
		return nil, err
	}
	a := &API{balances: b, ledger: l, events: ev, log: log, metrics: m, token: token,
		limiter: rate.NewLimiter(rate.Limit(opts.Rate), opts.Burst), mux: http.NewServeMux()}
	for _, r := range routes() {
		// A GET pattern serves HEAD too; the method-less one catches the rest.
		a.mux.HandleFunc("GET "+r.path, func(w http.ResponseWriter, req *http.Request) { r.handle(a, w, req) })
		a.mux.HandleFunc(r.path, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "the read API serves GET and HEAD only")
		})
	}
	a.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "no such route")
	})
	return a, nil
}

// ServeHTTP authenticates, then rate-limits, then routes. Authentication comes
// first so that requests without the token, which touch no database, cannot
// spend the bucket the operators' requests need.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	_, pattern := a.mux.Handler(r)
	// The pattern without its method; "" is the redirect of an unclean path.
	label := pattern[strings.IndexByte(pattern, ' ')+1:]
	if label == "/" || label == "" {
		label = otherRoute
	}
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
	defer func() { a.metrics.observe(label, rec.code, time.Since(start)) }()

	if !a.authorized(rec, r) {
		return
	}
	if res := a.limiter.Reserve(); res.Delay() > 0 {
		retry := res.Delay()
		res.Cancel()
		rec.Header().Set("Retry-After", retryAfter(retry))
		writeError(rec, http.StatusTooManyRequests, "rate limit exceeded")
		return
	}
	a.mux.ServeHTTP(rec, r)
}

// statusRecorder remembers the status code for the metrics.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// errorBody is every error response.
type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // the client went away: nothing to do
}
