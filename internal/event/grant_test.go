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

// invalidGrant is a command DecodeGrant refuses, the field and reason it
// names, and, when schemas/quota-grants.schema.json cannot say the rule it
// breaks, the rule (the schema takes such a command).
type invalidGrant struct {
	name, key, value, field, reason, unsaid string
}

func invalidGrants() []invalidGrant {
	replace := func(old, new string) string { return replaceIn(validGrant, old, new) }
	return []invalidGrant{
		{"not json", "", `{"grant_id":`, "", "not a JSON object", ""},
		{"missing grant_id", "", replace(`"grant_id":"plan-2026-12:m-42",`, ``), "grant_id", "missing", ""},
		{"brace in grant_id", "", replace(`"plan-2026-12:m-42"`, `"g{1}"`), "grant_id", "is not 1..64", ""},
		{"grant_id of an expiry", "", replace(`"plan-2026-12:m-42"`, `"expire:g-1"`), "grant_id", `starts with "expire:", reserved`, ""},
		{"grant_id of a rollover", "", replace(`"plan-2026-12:m-42"`, `"rollover:g-1"`), "grant_id", `starts with "rollover:", reserved`, ""},
		{"grant_id of an opening grant", "", replace(`"plan-2026-12:m-42"`, `"opening:m-42"`), "grant_id", `starts with "opening:", reserved`, ""},
		{"grant_id of a plan period", "", replace(`"plan-2026-12:m-42"`, `"plan:m-42:1764547200"`), "grant_id", `starts with "plan:", reserved`, ""},
		{"grant_id of a billed row", "", replace(`"plan-2026-12:m-42"`, `"billed:g-1"`), "grant_id", `starts with "billed:", reserved`, ""},
		{"missing merchant", "", replace(`"merchant_id":"m-42",`, ``), "merchant_id", "missing", ""},
		{"amount zero", "", replace(`1000`, `0`), "amount", "outside 1..10^12", ""},
		{"amount too big", "", replace(`1000`, `1000000000001`), "amount", "outside 1..10^12", ""},
		{"amount fraction", "", replace(`1000`, `1.5`), "amount", "not an integer", ""},
		{"missing amount", "", replace(`"amount":1000,`, ``), "amount", "missing", ""},
		{"missing source", "", replace(`,"source":"plans"`, ``), "source", "missing", ""},
		{"long source", "", replace(`"plans"`, `"`+strings.Repeat("s", 17)+`"`), "source", "is not 1..16", ""},
		{"bad expires_at", "", replace(`}`, `,"expires_at":"next week"}`), "expires_at", "not an RFC 3339 time", ""},
		{"priority too high", "", replace(`}`, `,"priority":101}`), "priority", "not an integer in 0..100", ""},
		{"priority fraction", "", replace(`}`, `,"priority":1.5}`), "priority", "not an integer in 0..100", ""},
		{"negative rollover", "", replace(`}`, `,"expires_at":"2027-01-01T00:00:00Z","rollover_max":-1}`), "rollover_max", "not an integer", ""},
		{"rollover without expiry", "", replace(`}`, `,"rollover_max":5}`), "rollover_max", "never expires", ""},
		{"bad starts_at", "", replace(`}`, `,"starts_at":"today"}`), "starts_at", "not an RFC 3339 time", ""},
		{"zero expires_at", "", replace(`}`, `,"expires_at":"0001-01-01T00:00:00Z"}`), "expires_at", "the zero time", ""},
		{"zero expires_at with rollover", "", replace(`}`, `,"expires_at":"0001-01-01T00:00:00Z","rollover_max":5}`), "expires_at", "the zero time", ""},
		{"zero starts_at", "", replace(`}`, `,"starts_at":"0001-01-01T00:00:00Z"}`), "starts_at", "the zero time", ""},
		{"null", "", `null`, "grant_id", "missing", ""},
		{"numeric source", "", replace(`"plans"`, `7`), "", "not a JSON object", ""},
		{"amount whole fraction", "", replace(`1000`, `1000.0`), "amount", "not an integer", "an integer written with a fraction"},
		{"priority string", "", replace(`}`, `,"priority":"1"}`), "priority", "not an integer in 0..100", ""},
		{"priority negative", "", replace(`}`, `,"priority":-1}`), "priority", "not an integer in 0..100", ""},
		{"priority exponent", "", replace(`}`, `,"priority":1e1}`), "priority", "not an integer in 0..100", "an integer written with an exponent"},
		{"rollover too big", "", replace(`}`, `,"expires_at":"2027-01-01T00:00:00Z","rollover_max":1000000000001}`), "rollover_max", "not an integer", ""},
		{"rollover with a null expiry", "", replace(`}`, `,"expires_at":null,"rollover_max":5}`), "rollover_max", "never expires", ""},
		{"numeric expires_at", "", replace(`}`, `,"expires_at":1798761600}`), "", "not a JSON object", ""},
		{"zero expires_at with a fraction", "", replace(`}`, `,"expires_at":"0001-01-01T00:00:00.000+00:00"}`), "expires_at", "the zero time", ""},
		{"zero starts_at at another offset", "", replace(`}`, `,"starts_at":"0001-01-01T01:00:00+01:00"}`), "starts_at", "the zero time", "the zero time written with another offset"},
		{"leap second", "", replace(`}`, `,"expires_at":"2016-12-31T23:59:60Z"}`), "expires_at", "not an RFC 3339 time", "Go's RFC 3339 parser has no leap seconds"},
		{"key mismatch", "m-43", validGrant, "key", "does not match", "the key is not in the value"},
	}
}

// validGrants are commands DecodeGrant takes: the schema takes them too.
func validGrants() []string {
	replace := func(old, new string) string { return replaceIn(validGrant, old, new) }
	return []string{
		validGrant,
		replace(`{`, `{"note":["any"],`),
		replace(`}`, `,"expires_at":"2027-01-01T00:00:00+01:00","priority":1,"rollover_max":10}`),
		replace(`}`, `,"starts_at":"2020-01-01T00:00:00Z","expires_at":"2020-02-01T00:00:00Z"}`),
		replace(`}`, `,"priority":null,"expires_at":null,"starts_at":null,"rollover_max":null}`),
		replace(`}`, `,"priority":0,"rollover_max":0}`),
		replace(`}`, `,"priority":100,"expires_at":"2027-01-01T00:00:00.5Z","rollover_max":1000000000000}`),
		replace(`}`, `,"starts_at":"0001-01-01T00:00:01Z"}`),
	}
}

func TestDecodeGrantValidVariants(t *testing.T) {
	for _, v := range validGrants() {
		if _, err := DecodeGrant(nil, []byte(v)); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
}

func TestDecodeGrantInvalid(t *testing.T) {
	for _, tt := range invalidGrants() {
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
