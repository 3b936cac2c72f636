package event

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const validGrant = `{"grant_id":"plan-2026-12:m-42","merchant_id":"m-42","amount":1000,"source":"plans"}`

func TestDecodeGrantValid(t *testing.T) {
	got, err := DecodeGrant([]byte("m-42"), []byte(validGrant))
	if err != nil {
		t.Fatal(err)
	}
	want := GrantCommand{GrantID: "plan-2026-12:m-42", MerchantID: "m-42", Amount: 1000, Source: "plans"}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	again, err := DecodeGrant(nil, got.Encode())
	if err != nil || again != got {
		t.Fatalf("round trip: %+v, %v", again, err)
	}
}

func TestDecodeGrantPeriod(t *testing.T) {
	v := strings.Replace(validGrant, `}`, `,"expires_at":"2027-01-01T00:00:00+01:00","priority":1,"rollover_max":10}`, 1)
	got, err := DecodeGrant(nil, []byte(v))
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC)
	if got.ExpiresAt == nil || !got.ExpiresAt.Equal(exp) || got.PriorityOr() != 1 || got.RolloverMax != 10 {
		t.Fatalf("got %+v", got)
	}
	again, err := DecodeGrant(nil, got.Encode())
	if err != nil || !again.ExpiresAt.Equal(exp) || again.PriorityOr() != 1 || again.RolloverMax != 10 {
		t.Fatalf("round trip: %+v, %v", again, err)
	}
	plain, _ := DecodeGrant(nil, []byte(validGrant))
	if plain.PriorityOr() != DefaultGrantPriority || plain.ExpiresAt != nil {
		t.Fatalf("defaults: %+v", plain)
	}
}

// A past expires_at is a time like any other: the grant was issued late for
// a period that has ended, and expires as soon as it is recorded.
func TestDecodeGrantPastExpiry(t *testing.T) {
	v := strings.Replace(validGrant, `}`, `,"starts_at":"2020-01-01T00:00:00Z","expires_at":"2020-02-01T00:00:00Z"}`, 1)
	got, err := DecodeGrant(nil, []byte(v))
	if err != nil {
		t.Fatal(err)
	}
	if exp := time.Date(2020, 2, 1, 0, 0, 0, 0, time.UTC); got.ExpiresAt == nil || !got.ExpiresAt.Equal(exp) || got.StartsAt == nil {
		t.Fatalf("got %+v, want expires_at %v", got, exp)
	}
}

func TestDecodeGrantInvalid(t *testing.T) {
	replace := func(old, new string) string { return strings.Replace(validGrant, old, new, 1) }
	tests := []struct {
		name, key, value, field, reason string
	}{
		{"not json", "", `{"grant_id":`, "", "not a JSON object"},
		{"missing grant_id", "", replace(`"grant_id":"plan-2026-12:m-42",`, ``), "grant_id", "missing"},
		{"brace in grant_id", "", replace(`"plan-2026-12:m-42"`, `"g{1}"`), "grant_id", "is not 1..64"},
		{"grant_id of an expiry", "", replace(`"plan-2026-12:m-42"`, `"expire:g-1"`), "grant_id", `starts with "expire:", reserved`},
		{"grant_id of a rollover", "", replace(`"plan-2026-12:m-42"`, `"rollover:g-1"`), "grant_id", `starts with "rollover:", reserved`},
		{"grant_id of an opening grant", "", replace(`"plan-2026-12:m-42"`, `"opening:m-42"`), "grant_id", `starts with "opening:", reserved`},
		{"grant_id of a plan period", "", replace(`"plan-2026-12:m-42"`, `"plan:m-42:1764547200"`), "grant_id", `starts with "plan:", reserved`},
		{"grant_id of a billed row", "", replace(`"plan-2026-12:m-42"`, `"billed:g-1"`), "grant_id", `starts with "billed:", reserved`},
		{"missing merchant", "", replace(`"merchant_id":"m-42",`, ``), "merchant_id", "missing"},
		{"amount zero", "", replace(`1000`, `0`), "amount", "outside 1..10^12"},
		{"amount too big", "", replace(`1000`, `1000000000001`), "amount", "outside 1..10^12"},
		{"amount fraction", "", replace(`1000`, `1.5`), "amount", "not an integer"},
		{"missing amount", "", replace(`"amount":1000,`, ``), "amount", "missing"},
		{"missing source", "", replace(`,"source":"plans"`, ``), "source", "missing"},
		{"long source", "", replace(`"plans"`, `"`+strings.Repeat("s", 17)+`"`), "source", "is not 1..16"},
		{"bad expires_at", "", replace(`}`, `,"expires_at":"next week"}`), "expires_at", "not an RFC 3339 time"},
		{"priority too high", "", replace(`}`, `,"priority":101}`), "priority", "not an integer in 0..100"},
		{"priority fraction", "", replace(`}`, `,"priority":1.5}`), "priority", "not an integer in 0..100"},
		{"negative rollover", "", replace(`}`, `,"expires_at":"2027-01-01T00:00:00Z","rollover_max":-1}`), "rollover_max", "not an integer"},
		{"rollover without expiry", "", replace(`}`, `,"rollover_max":5}`), "rollover_max", "never expires"},
		{"bad starts_at", "", replace(`}`, `,"starts_at":"today"}`), "starts_at", "not an RFC 3339 time"},
		{"zero expires_at", "", replace(`}`, `,"expires_at":"0001-01-01T00:00:00Z"}`), "expires_at", "the zero time"},
		{"zero expires_at with rollover", "", replace(`}`, `,"expires_at":"0001-01-01T00:00:00Z","rollover_max":5}`), "expires_at", "the zero time"},
		{"zero starts_at", "", replace(`}`, `,"starts_at":"0001-01-01T00:00:00Z"}`), "starts_at", "the zero time"},
		{"key mismatch", "m-43", validGrant, "key", "does not match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeGrant([]byte(tt.key), []byte(tt.value))
			var ie *InvalidError
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &ie) {
				t.Fatalf("err = %v, want an *InvalidError", err)
			}
			if ie.Field != tt.field || !strings.Contains(ie.Reason, tt.reason) {
				t.Fatalf("got %q: %q, want %q: ...%s...", ie.Field, ie.Reason, tt.field, tt.reason)
			}
		})
	}
}
