package adminapi

import (
	"net/http"
	"strconv"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/event"
)

// Ledger page sizes.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// merchant returns the path's merchant id, or answers 400.
func merchant(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if !event.ValidID(id) {
		writeError(w, http.StatusBadRequest, "merchant id must be 1..64 characters of [A-Za-z0-9_.:-]")
		return "", false
	}
	return id, true
}

// unavailable answers 503 for a database that failed, logged once here.
func (a *API) unavailable(w http.ResponseWriter, merchantID string, err error) {
	a.log.Warn("read API: database read failed", zap.String("merchant_id", merchantID), zap.Error(err))
	writeError(w, http.StatusServiceUnavailable, "a database is unavailable; retry later")
}

func (a *API) balance(w http.ResponseWriter, r *http.Request) {
	id, ok := merchant(w, r)
	if !ok {
		return
	}
	v, err := a.balances.Show(r.Context(), id)
	switch {
	case err != nil:
		a.unavailable(w, id, err)
	case !v.Known:
		writeError(w, http.StatusNotFound, "unknown merchant (no balance row)")
	default:
		writeJSON(w, http.StatusOK, newBalanceView(v))
	}
}

func (a *API) ledgerPage(w http.ResponseWriter, r *http.Request) {
	id, ok := merchant(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	after, limit := int64(0), DefaultLimit
	var err error
	if s := q.Get("after"); s != "" {
		if after, err = strconv.ParseInt(s, 10, 64); err != nil || after < 0 {
			writeError(w, http.StatusBadRequest, "after must be a seq of the merchant's ledger (a non-negative integer)")
			return
		}
	}
	if s := q.Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 || limit > MaxLimit {
			writeError(w, http.StatusBadRequest, "limit must be an integer in 1..1000")
			return
		}
	}
	bals, err := a.ledger.Balances(r.Context(), []string{id})
	if err != nil {
		a.unavailable(w, id, err)
		return
	}
	if _, known := bals[id]; !known {
		writeError(w, http.StatusNotFound, "unknown merchant (no balance row)")
		return
	}
	// One row more than asked tells whether another page follows.
	rows, err := a.ledger.MerchantRows(r.Context(), id, after, limit+1)
	if err != nil {
		a.unavailable(w, id, err)
		return
	}
	writeJSON(w, http.StatusOK, newPageView(id, rows, limit))
}

func (a *API) event(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !event.ValidID(id) {
		writeError(w, http.StatusBadRequest, "event id must be 1..64 characters of [A-Za-z0-9_.:-]")
		return
	}
	v, err := a.events.Show(r.Context(), id)
	switch {
	case err != nil:
		a.log.Warn("read API: event lookup failed", zap.String("event_id", id), zap.Error(err))
		writeError(w, http.StatusServiceUnavailable, "the ledger, outbox or DLQ topic is unavailable; retry later")
	case !v.Known():
		writeError(w, http.StatusNotFound, "nothing is known of this event: no ledger row, no dead-letter record, no balance event")
	default:
		writeJSON(w, http.StatusOK, v)
	}
}
