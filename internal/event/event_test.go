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

func TestDecodeInvalid(t *testing.T) {
	replace := func(old, new string) string { return strings.Replace(valid, old, new, 1) }
	tests := []struct {
		name, key, value, field string
	}{
		{"not json", "", `{"event_id":`, ""},
		{"array", "", `[1,2]`, ""},
		{"trailing", "", valid + `{}`, ""},
		{"missing event_id", "", replace(`"event_id":"evt-1",`, ``), "event_id"},
		{"empty event_id", "", replace(`"evt-1"`, `""`), "event_id"},
		{"brace in event_id", "", replace(`"evt-1"`, `"evt-{1}"`), "event_id"},
		{"event_id of an expiry", "", replace(`"evt-1"`, `"expire:g-1"`), "event_id"},
		{"event_id of a plan period", "", replace(`"evt-1"`, `"plan:m-42:1764547200"`), "event_id"},
		{"space in merchant", "", replace(`"m-42"`, `"m 42"`), "merchant_id"},
		{"long merchant", "", replace(`"m-42"`, `"`+strings.Repeat("m", 65)+`"`), "merchant_id"},
		{"amount zero", "", replace(`"amount":3`, `"amount":0`), "amount"},
		{"amount negative", "", replace(`"amount":3`, `"amount":-3`), "amount"},
		{"amount fraction", "", replace(`"amount":3`, `"amount":3.5`), "amount"},
		{"amount exponent", "", replace(`"amount":3`, `"amount":1e3`), "amount"},
		{"amount string", "", replace(`"amount":3`, `"amount":"3"`), "amount"},
		{"amount too big", "", replace(`"amount":3`, `"amount":1000000000001`), "amount"},
		{"amount overflow", "", replace(`"amount":3`, `"amount":99999999999999999999`), "amount"},
		{"bad source", "", replace(`"pc"`, `"pos"`), "source"},
		{"missing source", "", replace(`"source":"pc",`, ``), "source"},
		{"bad time", "", replace(`2026-11-29T07:00:00Z`, `yesterday`), "occurred_at"},
		{"missing payment", "", replace(`"payment_id":"pay-1",`, ``), "payment_id"},
		{"control in payment", "", replace(`"pay-1"`, `"pay\u0001"`), "payment_id"},
		{"key mismatch", "m-43", valid, "key"},
	}
	for _, tt := range tests {
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

func TestUnknownFieldsIgnored(t *testing.T) {
	v := strings.Replace(valid, `{`, `{"extra":{"nested":true},`, 1)
	if _, err := Decode(nil, []byte(v)); err != nil {
		t.Fatal(err)
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
