package event

import (
	"encoding/json"
	"fmt"
)

// MaxGrantSourceLen bounds a grant command's source (the ledger's source column).
const MaxGrantSourceLen = 16

// GrantCommand is one validated command of the quota.grants topic: credit
// Amount to MerchantID once per GrantID, forever.
type GrantCommand struct {
	GrantID    string `json:"grant_id"`
	MerchantID string `json:"merchant_id"`
	Amount     int64  `json:"amount"`
	Source     string `json:"source"` // who granted: 1..16 characters of [A-Za-z0-9_.:-]
}

type grantWire struct {
	GrantID    string          `json:"grant_id"`
	MerchantID string          `json:"merchant_id"`
	Amount     json.RawMessage `json:"amount"`
	Source     string          `json:"source"`
	ExpiresAt  *string         `json:"expires_at"`
}

// DecodeGrant parses and validates a grant command; key, when present, must
// equal merchant_id. expires_at is reserved: a well-formed one is refused
// all the same, since a grant that should expire must not be applied as one
// that never does (replay it from the DLQ once expiry exists).
func DecodeGrant(key, value []byte) (GrantCommand, error) {
	var w grantWire
	if err := json.Unmarshal(value, &w); err != nil {
		return GrantCommand{}, &InvalidError{Reason: "not a JSON object: " + err.Error()}
	}
	var g GrantCommand
	var errs []error
	g.GrantID, errs = requireID(errs, "grant_id", w.GrantID)
	g.MerchantID, errs = requireID(errs, "merchant_id", w.MerchantID)
	g.Amount, errs = requireAmount(errs, w.Amount)
	g.Source, errs = requireGrantSource(errs, w.Source)
	if w.ExpiresAt != nil {
		if _, errs = requireTime(errs, "expires_at", *w.ExpiresAt); len(errs) == 0 {
			errs = append(errs, &InvalidError{Field: "expires_at", Reason: "grant expiry is not supported yet; send the grant without it"})
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

// Encode renders the command in its wire form.
func (g GrantCommand) Encode() []byte {
	b, _ := json.Marshal(g) // cannot fail: strings and an int64
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
