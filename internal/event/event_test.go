package event

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const valid = `{"event_id":"evt-1","payment_id":"pay-1","merchant_id":"m-42","amount":3,"source":"pc","occurred_at":"2026-11-29T07:00:00Z"}`

func TestDecodeValid(t *testing.T) {
	got, err := Decode([]byte("m-42"), []byte(valid))
	if err != nil {
		t.Fatal(err)
	}
	want := PaymentSucceeded{EventID: "evt-1", PaymentID: "pay-1", MerchantID: "m-42", Amount: 3, Source: SourcePC,
		OccurredAt: time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	again, err := Decode(nil, got.Encode())
	if err != nil || again != got {
		t.Fatalf("round trip: %+v, %v", again, err)
	}
}

// replaceIn is v with the first old replaced by new.
func replaceIn(v, old, new string) string { return strings.Replace(v, old, new, 1) }

// invalidEvent is a message Decode refuses, the field it names, and, when
// schemas/payment-succeeded.schema.json cannot say the rule it breaks, the
// rule (the schema takes such a message).
type invalidEvent struct {
	name, key, value, field, unsaid string
}

func invalidEvents() []invalidEvent {
	replace := func(old, new string) string { return replaceIn(valid, old, new) }
	return []invalidEvent{
		{"not json", "", `{"event_id":`, "", ""},
		{"array", "", `[1,2]`, "", ""},
		{"null", "", `null`, "event_id", ""},
		{"trailing", "", valid + `{}`, "", ""},
		{"missing event_id", "", replace(`"event_id":"evt-1",`, ``), "event_id", ""},
		{"empty event_id", "", replace(`"evt-1"`, `""`), "event_id", ""},
		{"numeric event_id", "", replace(`"evt-1"`, `1`), "", ""},
		{"brace in event_id", "", replace(`"evt-1"`, `"evt-{1}"`), "event_id", ""},
		{"event_id of an expiry", "", replace(`"evt-1"`, `"expire:g-1"`), "event_id", ""},
		{"event_id of a plan period", "", replace(`"evt-1"`, `"plan:m-42:1764547200"`), "event_id", ""},
		{"space in merchant", "", replace(`"m-42"`, `"m 42"`), "merchant_id", ""},
		{"long merchant", "", replace(`"m-42"`, `"`+strings.Repeat("m", 65)+`"`), "merchant_id", ""},
		{"null merchant", "", replace(`"m-42"`, `null`), "merchant_id", ""},
		{"amount zero", "", replace(`"amount":3`, `"amount":0`), "amount", ""},
		{"amount negative", "", replace(`"amount":3`, `"amount":-3`), "amount", ""},
		{"amount fraction", "", replace(`"amount":3`, `"amount":3.5`), "amount", ""},
		{"amount whole fraction", "", replace(`"amount":3`, `"amount":3.0`), "amount", "an integer written with a fraction"},
		{"amount exponent", "", replace(`"amount":3`, `"amount":1e3`), "amount", "an integer written with an exponent"},
		{"amount string", "", replace(`"amount":3`, `"amount":"3"`), "amount", ""},
		{"amount null", "", replace(`"amount":3`, `"amount":null`), "amount", ""},
		{"amount too big", "", replace(`"amount":3`, `"amount":1000000000001`), "amount", ""},
		{"amount overflow", "", replace(`"amount":3`, `"amount":99999999999999999999`), "amount", ""},
		{"bad source", "", replace(`"pc"`, `"pos"`), "source", ""},
		{"missing source", "", replace(`"source":"pc",`, ``), "source", ""},
		{"bad time", "", replace(`2026-11-29T07:00:00Z`, `yesterday`), "occurred_at", ""},
		{"date only", "", replace(`2026-11-29T07:00:00Z`, `2026-11-29`), "occurred_at", ""},
		{"no offset", "", replace(`2026-11-29T07:00:00Z`, `2026-11-29T07:00:00`), "occurred_at", ""},
		{"lower-case t and z", "", replace(`2026-11-29T07:00:00Z`, `2026-11-29t07:00:00z`), "occurred_at", "Go's RFC 3339 parser wants T and Z"},
		{"leap second", "", replace(`2026-11-29T07:00:00Z`, `2016-12-31T23:59:60Z`), "occurred_at", "Go's RFC 3339 parser has no leap seconds"},
		{"missing payment", "", replace(`"payment_id":"pay-1",`, ``), "payment_id", ""},
		{"control in payment", "", replace(`"pay-1"`, `"pay\u0001"`), "payment_id", ""},
		{"long payment", "", replace(`"pay-1"`, `"`+strings.Repeat("p", 129)+`"`), "payment_id", ""},
		{"payment of 129 bytes in 43 characters", "", replace(`"pay-1"`, `"`+strings.Repeat("支", 43)+`"`), "payment_id", "maxLength counts characters, not bytes"},
		{"key mismatch", "m-43", valid, "key", "the key is not in the value"},
	}
}

// validEvents are messages Decode takes (unknown fields ignored, any
// offset, the bounds of every field): the schema takes them too.
func validEvents() []string {
	return []string{
		valid,
		replaceIn(valid, `{`, `{"extra":{"nested":true},`),
		replaceIn(valid, `2026-11-29T07:00:00Z`, `2026-11-29T08:00:00.123456789+01:00`),
		replaceIn(replaceIn(valid, `"evt-1"`, `"`+strings.Repeat("e", 64)+`"`), `"m-42"`, `"A-z_0.9:x"`),
		replaceIn(replaceIn(valid, `"amount":3`, `"amount":1000000000000`), `"pc"`, `"miniapp"`),
		replaceIn(replaceIn(valid, `"pay-1"`, `"`+strings.Repeat("支", 42)+`"`), `"pc"`, `"openapi"`),
		replaceIn(valid, `"evt-1"`, `"expires:1"`), // not a reserved prefix
		`{"occurred_at":"2026-11-29T07:00:00Z","source":"pc","amount":3,"merchant_id":"m-42","payment_id":"pay 1 / é","event_id":"evt-1"}`,
	}
}

func TestDecodeInvalid(t *testing.T) {
	for _, tt := range invalidEvents() {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.key), []byte(tt.value))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			var ie *InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("err %T is not *InvalidError", err)
			}
			if tt.field != "" && ie.Field != tt.field {
				t.Fatalf("field = %q, want %q (%v)", ie.Field, tt.field, err)
			}
		})
	}
}

func TestDecodeValidVariants(t *testing.T) {
	for _, v := range validEvents() {
		if _, err := Decode(nil, []byte(v)); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
}

func TestValidID(t *testing.T) {
	tests := map[string]bool{"a": true, "A-z_0.9:x": true, "": false, "a b": false, "{a}": false, "é": false, strings.Repeat("x", 64): true, strings.Repeat("x", 65): false}
	for in, want := range tests {
		if got := ValidID(in); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", in, got, want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(valid))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Decode(nil, b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error not classified: %v", err)
			}
			return
		}
		if !ValidID(e.EventID) || !ValidID(e.MerchantID) || e.Amount < 1 || e.Amount > MaxAmount {
			t.Fatalf("accepted invalid event %+v", e)
		}
	})
}
