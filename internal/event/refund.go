package event

import (
	"encoding/json"
	"fmt"
	"time"
)

// The reasons of a refund.
const (
	RefundReasonRefund     = "refund"
	RefundReasonChargeback = "chargeback"
	RefundReasonCorrection = "correction"
)

// RefundCommand is one validated message of the payment.refunded topic:
// give back up to Amount of what the payment EventID debited MerchantID,
// once per RefundID, forever.
type RefundCommand struct {
	RefundID   string    `json:"refund_id"`
	EventID    string    `json:"event_id"` // the refunded payment's
	MerchantID string    `json:"merchant_id"`
	Amount     int64     `json:"amount"`
	Reason     string    `json:"reason"`
	OccurredAt time.Time `json:"occurred_at"`
}

type refundWire struct {
	RefundID   string          `json:"refund_id"`
	EventID    string          `json:"event_id"`
	MerchantID string          `json:"merchant_id"`
	Amount     json.RawMessage `json:"amount"`
	Reason     string          `json:"reason"`
	OccurredAt string          `json:"occurred_at"`
}

// DecodeRefund parses and validates a refund; key, when present, must equal
// merchant_id.
func DecodeRefund(key, value []byte) (RefundCommand, error) {
	var w refundWire
	if err := json.Unmarshal(value, &w); err != nil {
		return RefundCommand{}, &InvalidError{Reason: "not a JSON object: " + err.Error()}
	}
	var r RefundCommand
	var errs []error
	r.RefundID, errs = requireID(errs, "refund_id", w.RefundID)
	r.EventID, errs = requireID(errs, "event_id", w.EventID)
	r.MerchantID, errs = requireID(errs, "merchant_id", w.MerchantID)
	r.Amount, errs = requireAmount(errs, w.Amount)
	switch w.Reason {
	case RefundReasonRefund, RefundReasonChargeback, RefundReasonCorrection:
		r.Reason = w.Reason
	case "":
		errs = append(errs, &InvalidError{Field: "reason", Reason: "missing"})
	default:
		errs = append(errs, &InvalidError{Field: "reason", Reason: fmt.Sprintf("%q is not refund, chargeback or correction", truncate(w.Reason))})
	}
	r.OccurredAt, errs = requireTime(errs, "occurred_at", w.OccurredAt)
	if len(errs) > 0 {
		return RefundCommand{}, errs[0]
	}
	if len(key) > 0 && string(key) != r.MerchantID {
		return RefundCommand{}, &InvalidError{Field: "key", Reason: fmt.Sprintf("message key %q does not match merchant_id %q", key, r.MerchantID)}
	}
	return r, nil
}

// Encode renders the refund in its wire form.
func (r RefundCommand) Encode() []byte {
	b, _ := json.Marshal(r) // cannot fail: strings, an integer and a time
	return b
}
