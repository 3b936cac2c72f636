package event

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// MaxGrantSourceLen bounds a grant command's source (the ledger's source column).
const MaxGrantSourceLen = 16

// Grant priorities: a grant of a lower priority burns first.
const (
	MinGrantPriority     = 0
	MaxGrantPriority     = 100
	DefaultGrantPriority = 50
)

// GrantCommand is one validated command of the quota.grants topic: credit
// Amount to MerchantID once per GrantID, forever.
type GrantCommand struct {
	GrantID    string `json:"grant_id"`
	MerchantID string `json:"merchant_id"`
	Amount     int64  `json:"amount"`
	Source     string `json:"source"` // who granted: 1..16 characters of [A-Za-z0-9_.:-]
	// Priority orders the burn-down (lower first); nil: DefaultGrantPriority.
	Priority *int `json:"priority,omitempty"`
	// ExpiresAt nil: the grant never expires.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// RolloverMax is how much of the remainder at expiry is carried into a
	// new grant (0: none).
	RolloverMax int64 `json:"rollover_max,omitempty"`
	// StartsAt is the start of the period a plan grant is for; nil: now.
	StartsAt *time.Time `json:"starts_at,omitempty"`
}

// PriorityOr is the command's priority, or DefaultGrantPriority.
func (g GrantCommand) PriorityOr() int {
	if g.Priority == nil {
		return DefaultGrantPriority
	}
	return *g.Priority
}

type grantWire struct {
	GrantID     string          `json:"grant_id"`
	MerchantID  string          `json:"merchant_id"`
	Amount      json.RawMessage `json:"amount"`
	Source      string          `json:"source"`
	ExpiresAt   *string         `json:"expires_at"`
	Priority    json.RawMessage `json:"priority"`
	RolloverMax json.RawMessage `json:"rollover_max"`
	StartsAt    *string         `json:"starts_at"`
}

// DecodeGrant parses and validates a grant command; key, when present, must
// equal merchant_id. expires_at, priority (0..100), rollover_max (needs
// expires_at) and starts_at are optional; absent or null, the grant never
// expires and starts now. The zero time (0001-01-01T00:00:00Z) is invalid in
// either: it is no time, not "never" or "now". A past expires_at is valid:
// the grant was issued late for a period that has ended, is recorded, and
// expires at once through the normal expiry path (its rollover, if any,
// lasting as long as the period from starts_at did).
func DecodeGrant(key, value []byte) (GrantCommand, error) {
	var w grantWire
	if err := json.Unmarshal(value, &w); err != nil {
		return GrantCommand{}, &InvalidError{Reason: "not a JSON object: " + err.Error()}
	}
	var g GrantCommand
	var errs []error
	g.GrantID, errs = requireOwnID(errs, "grant_id", w.GrantID)
	g.MerchantID, errs = requireID(errs, "merchant_id", w.MerchantID)
	g.Amount, errs = requireAmount(errs, w.Amount)
	g.Source, errs = requireGrantSource(errs, w.Source)
	g.ExpiresAt, errs = optionalTime(errs, "expires_at", w.ExpiresAt)
	g.StartsAt, errs = optionalTime(errs, "starts_at", w.StartsAt)
	if w.Priority != nil && string(w.Priority) != "null" {
		p, err := strconv.Atoi(string(w.Priority))
		if err != nil || p < MinGrantPriority || p > MaxGrantPriority {
			errs = append(errs, &InvalidError{Field: "priority", Reason: fmt.Sprintf("%s is not an integer in 0..100", truncate(string(w.Priority)))})
		} else {
			g.Priority = &p
		}
	}
	if w.RolloverMax != nil && string(w.RolloverMax) != "null" {
		n, err := strconv.ParseInt(string(w.RolloverMax), 10, 64)
		switch {
		case err != nil || n < 0 || n > MaxAmount:
			errs = append(errs, &InvalidError{Field: "rollover_max", Reason: fmt.Sprintf("%s is not an integer in 0..10^12", truncate(string(w.RolloverMax)))})
		case n > 0 && w.ExpiresAt == nil:
			errs = append(errs, &InvalidError{Field: "rollover_max", Reason: "a grant that never expires has nothing to roll over"})
		default:
			g.RolloverMax = n
		}
	}
	if len(errs) > 0 {
		return GrantCommand{}, errs[0]
	}
	if len(key) > 0 && string(key) != g.MerchantID {
		return GrantCommand{}, &InvalidError{Field: "key", Reason: fmt.Sprintf("message key %q does not match merchant_id %q", key, g.MerchantID)}
	}
	return g, nil
}

// optionalTime is the time of an optional field v (nil: absent or null),
// which may not be the zero time.
func optionalTime(errs []error, field string, v *string) (*time.Time, []error) {
	if v == nil {
		return nil, errs
	}
	n := len(errs)
	t, errs := requireTime(errs, field, *v)
	switch {
	case len(errs) > n:
		return nil, errs
	case t.IsZero():
		return nil, append(errs, &InvalidError{Field: field, Reason: fmt.Sprintf("%q is the zero time: omit the field (or null) for none", truncate(*v))})
	}
	return &t, errs
}

// Encode renders the command in its wire form.
func (g GrantCommand) Encode() []byte {
	b, _ := json.Marshal(g) // cannot fail: strings, integers and times
	return b
}

func requireGrantSource(errs []error, v string) (string, []error) {
	switch {
	case v == "":
		return "", append(errs, &InvalidError{Field: "source", Reason: "missing"})
	case len(v) > MaxGrantSourceLen || !ValidID(v):
		return "", append(errs, &InvalidError{Field: "source", Reason: fmt.Sprintf("%q is not 1..16 characters of [A-Za-z0-9_.:-]", truncate(v))})
	}
	return v, errs
}
