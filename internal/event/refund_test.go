package event

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const validRefund = `{"refund_id":"rf-1","event_id":"evt-1","merchant_id":"m-42","amount":3,"reason":"refund","occurred_at":"2026-11-29T08:00:00Z"}`

func TestDecodeRefundValid(t *testing.T) {
	got, err := DecodeRefund([]byte("m-42"), []byte(validRefund))
	if err != nil {
		t.Fatal(err)
	}
	want := RefundCommand{RefundID: "rf-1", EventID: "evt-1", MerchantID: "m-42", Amount: 3, Reason: RefundReasonRefund,
		OccurredAt: time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	again, err := DecodeRefund(nil, got.Encode())
	if err != nil || again != got {
		t.Fatalf("round trip: %+v, %v", again, err)
	}
}

// invalidRefund is a refund DecodeRefund refuses, the field and reason it
// names, and, when schemas/payment-refunded.schema.json cannot say the rule
// it breaks, the rule (the schema takes such a refund).
type invalidRefund struct {
	name, key, value, field, reason, unsaid string
}

func invalidRefunds() []invalidRefund {
	replace := func(old, new string) string { return replaceIn(validRefund, old, new) }
	return []invalidRefund{
		{"not json", "", `{"refund_id":`, "", "not a JSON object", ""},
		{"missing refund_id", "", replace(`"refund_id":"rf-1",`, ``), "refund_id", "missing", ""},
		{"brace in refund_id", "", replace(`"rf-1"`, `"r{1}"`), "refund_id", "is not 1..64", ""},
		{"missing event_id", "", replace(`"event_id":"evt-1",`, ``), "event_id", "missing", ""},
		{"long event_id", "", replace(`"evt-1"`, `"`+strings.Repeat("e", 65)+`"`), "event_id", "is not 1..64", ""},
		{"missing merchant", "", replace(`"merchant_id":"m-42",`, ``), "merchant_id", "missing", ""},
		{"amount zero", "", replace(`"amount":3`, `"amount":0`), "amount", "outside 1..10^12", ""},
		{"amount negative", "", replace(`"amount":3`, `"amount":-3`), "amount", "outside 1..10^12", ""},
		{"amount string", "", replace(`"amount":3`, `"amount":"3"`), "amount", "not an integer", ""},
		{"amount fraction", "", replace(`"amount":3`, `"amount":3.0`), "amount", "not an integer", "an integer written with a fraction"},
		{"missing reason", "", replace(`"reason":"refund",`, ``), "reason", "missing", ""},
		{"other reason", "", replace(`"refund",`, `"gift",`), "reason", "is not refund, chargeback or correction", ""},
		{"missing occurred_at", "", replace(`,"occurred_at":"2026-11-29T08:00:00Z"`, ``), "occurred_at", "missing", ""},
		{"bad occurred_at", "", replace(`2026-11-29T08:00:00Z`, `yesterday`), "occurred_at", "not an RFC 3339 time", ""},
		{"null", "", `null`, "refund_id", "missing", ""},
		{"key mismatch", "m-43", validRefund, "key", "does not match", "the key is not in the value"},
	}
}

// validRefunds are refunds DecodeRefund takes: the schema takes them too.
func validRefunds() []string {
	replace := func(old, new string) string { return replaceIn(validRefund, old, new) }
	return []string{
		validRefund,
		replace(`{`, `{"note":["any"],`),
		replace(`"refund"`, `"chargeback"`),
		replace(`"refund"`, `"correction"`),
		replace(`"amount":3`, `"amount":1000000000000`),
		replace(`2026-11-29T08:00:00Z`, `2026-11-29T09:00:00.5+01:00`),
	}
}

func TestDecodeRefundValidVariants(t *testing.T) {
	for _, v := range validRefunds() {
		if _, err := DecodeRefund(nil, []byte(v)); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
}

func TestDecodeRefundInvalid(t *testing.T) {
	for _, tt := range invalidRefunds() {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeRefund([]byte(tt.key), []byte(tt.value))
			var ie *InvalidError
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &ie) {
				t.Fatalf("err = %v, want an *InvalidError", err)
			}
			if ie.Field != tt.field || !strings.Contains(ie.Reason, tt.reason) {
				t.Errorf("got field %q reason %q, want %q containing %q", ie.Field, ie.Reason, tt.field, tt.reason)
			}
		})
	}
}
