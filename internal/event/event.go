// Package event is the Kafka contract of payment.succeeded and quota.grants:
// decoding and validation. What fails them is permanent: dead-lettered at once, never retried.
package event

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Source is the channel a payment came from.
type Source string

// The three channels.
const (
	SourcePC      Source = "pc"
	SourceMiniApp Source = "miniapp"
	SourceOpenAPI Source = "openapi"
)

// Limits of the contract.
const (
	MaxIDLen        = 64
	MaxPaymentIDLen = 128
	MaxAmount       = 1_000_000_000_000
)

// ErrInvalid marks an event that breaks the contract (*InvalidError says how).
var ErrInvalid = errors.New("event: invalid")

// InvalidError says which field broke the contract and how.
type InvalidError struct {
	Field  string
	Reason string
}

func (e *InvalidError) Error() string {
	if e.Field == "" {
		return "event: invalid: " + e.Reason
	}
	return "event: invalid " + e.Field + ": " + e.Reason
}

// Is makes errors.Is(err, ErrInvalid) hold.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// PaymentSucceeded is one validated event.
type PaymentSucceeded struct {
	EventID    string    `json:"event_id"`
	PaymentID  string    `json:"payment_id"`
	MerchantID string    `json:"merchant_id"`
	Amount     int64     `json:"amount"`
	Source     Source    `json:"source"`
	OccurredAt time.Time `json:"occurred_at"`
}

// wire is the JSON form as read. A missing string field reads as "", which
// no field accepts: "missing" covers both.
type wire struct {
	EventID    string          `json:"event_id"`
	PaymentID  string          `json:"payment_id"`
	MerchantID string          `json:"merchant_id"`
	Amount     json.RawMessage `json:"amount"`
	Source     string          `json:"source"`
	OccurredAt string          `json:"occurred_at"`
}

// Decode parses and validates a message. key is the Kafka key; when present it
// must equal merchant_id, or the merchant's events would be split across partitions.
func Decode(key, value []byte) (PaymentSucceeded, error) {
	var w wire
	// Unmarshal refuses trailing data as well as malformed JSON.
	if err := json.Unmarshal(value, &w); err != nil {
		return PaymentSucceeded{}, &InvalidError{Reason: "not a JSON object: " + err.Error()}
	}
	var e PaymentSucceeded
	var errs []error
	e.EventID, errs = requireOwnID(errs, "event_id", w.EventID)
	e.MerchantID, errs = requireID(errs, "merchant_id", w.MerchantID)
	e.PaymentID, errs = requirePaymentID(errs, w.PaymentID)
	e.Amount, errs = requireAmount(errs, w.Amount)
	e.Source, errs = requireSource(errs, w.Source)
	e.OccurredAt, errs = requireTime(errs, "occurred_at", w.OccurredAt)
	if len(errs) > 0 {
		return PaymentSucceeded{}, errs[0] // the first is enough to route it; all are equally fatal
	}
	if err := e.CheckKey(key); err != nil {
		return PaymentSucceeded{}, err
	}
	return e, nil
}

// CheckKey is Decode's check of the Kafka key: empty or the merchant_id.
func (e PaymentSucceeded) CheckKey(key []byte) error {
	if len(key) > 0 && string(key) != e.MerchantID {
		return &InvalidError{Field: "key", Reason: fmt.Sprintf("message key %q does not match merchant_id %q", key, e.MerchantID)}
	}
	return nil
}

// Encode renders the event in its wire form.
func (e PaymentSucceeded) Encode() []byte {
	b, _ := json.Marshal(e) // cannot fail: only strings, an int64 and a time
	return b
}

// ValidID reports whether s is a well-formed event or merchant id: 1..64
// characters of [A-Za-z0-9_.:-]. Braces are excluded because ids become Redis hash tags.
func ValidID(s string) bool {
	return len(s) > 0 && len(s) <= MaxIDLen && !strings.ContainsFunc(s, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_.:-", c))
	})
}

// reservedPrefixes start the ids billing derives itself (ledger.DerivedID:
// an expiry, a rollover, an opening grant, a plan period's grant, the billed
// row a grant writes for a merchant in overage, a revoke, a refund's rows). A payment
// or grant from outside may not use them: it would take the place of the
// derived row (its unique event_id) and stop that expiry or grant for good.
var reservedPrefixes = []string{"expire:", "rollover:", "opening:", "plan:", "billed:", "revoke:", "refund:", "refund-grants:"}

// Reserved returns the reserved prefix that id starts with, if any.
func Reserved(id string) (prefix string, ok bool) {
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(id, p) {
			return p, true
		}
	}
	return "", false
}

// requireOwnID is requireID for the id of a payment or a grant from outside:
// it may not start with a reserved prefix either.
func requireOwnID(errs []error, field string, v string) (string, []error) {
	v, errs = requireID(errs, field, v)
	if p, ok := Reserved(v); ok {
		return "", append(errs, &InvalidError{Field: field, Reason: fmt.Sprintf("%q starts with %q, reserved for the ids billing derives", truncate(v), p)})
	}
	return v, errs
}

func requireID(errs []error, field string, v string) (string, []error) {
	switch {
	case v == "":
		return "", append(errs, &InvalidError{Field: field, Reason: "missing"})
	case !ValidID(v):
		return "", append(errs, &InvalidError{Field: field, Reason: fmt.Sprintf("%q is not 1..64 characters of [A-Za-z0-9_.:-]", truncate(v))})
	}
	return v, errs
}

func requirePaymentID(errs []error, v string) (string, []error) {
	switch {
	case v == "":
		return "", append(errs, &InvalidError{Field: "payment_id", Reason: "missing"})
	case len(v) > MaxPaymentIDLen:
		return "", append(errs, &InvalidError{Field: "payment_id", Reason: "must be 1..128 bytes"})
	case strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "", append(errs, &InvalidError{Field: "payment_id", Reason: "contains a control character"})
	}
	return v, errs
}

func requireAmount(errs []error, v json.RawMessage) (int64, []error) {
	if v == nil || string(v) == "null" {
		return 0, append(errs, &InvalidError{Field: "amount", Reason: "missing"})
	}
	// Parsed from the raw JSON so that "3" (a string), 3.0 and 3e0 are all refused.
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, append(errs, &InvalidError{Field: "amount", Reason: fmt.Sprintf("%s is not an integer number of quota units", truncate(string(v)))})
	}
	if n < 1 || n > MaxAmount {
		return 0, append(errs, &InvalidError{Field: "amount", Reason: fmt.Sprintf("%d is outside 1..10^12", n)})
	}
	return n, errs
}

func requireSource(errs []error, v string) (Source, []error) {
	if v == "" {
		return "", append(errs, &InvalidError{Field: "source", Reason: "missing"})
	}
	switch s := Source(v); s {
	case SourcePC, SourceMiniApp, SourceOpenAPI:
		return s, errs
	}
	return "", append(errs, &InvalidError{Field: "source", Reason: fmt.Sprintf("%q is not one of pc, miniapp, openapi", truncate(v))})
}

func requireTime(errs []error, field, v string) (time.Time, []error) {
	if v == "" {
		return time.Time{}, append(errs, &InvalidError{Field: field, Reason: "missing"})
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, append(errs, &InvalidError{Field: field, Reason: fmt.Sprintf("%q is not an RFC 3339 time", truncate(v))})
	}
	return t.UTC(), errs
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
