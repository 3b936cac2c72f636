package event

import (
	"testing"

	"github.com/quotaflow/billing/schemas"
)

// The schemas of payment.succeeded, quota.grants and payment.refunded hold what the decoders
// hold, over the decoders' own fixtures: a message a decoder takes validates;
// one it refuses is refused by the schema too, except where the fixture names
// the rule JSON Schema cannot say (the schema then takes it, so the list of
// such rules stays exact): an integer written 3.0 or 1e3 (JSON Schema's
// integer is a value), a length in bytes (maxLength counts characters), what
// Go's time parser refuses beyond RFC 3339 (leap seconds, t and z), the zero
// time at another offset, and the Kafka key (not in the value).
func TestSchemasHoldWhatTheDecodersHold(t *testing.T) {
	type fixture struct {
		name, value string
		refused     bool // by the schema
	}
	var payments, grants, refunds []fixture
	for _, v := range validEvents() {
		payments = append(payments, fixture{"valid", v, false})
	}
	for _, tt := range invalidEvents() {
		payments = append(payments, fixture{tt.name + ": " + tt.unsaid, tt.value, tt.unsaid == ""})
	}
	for _, v := range validGrants() {
		grants = append(grants, fixture{"valid", v, false})
	}
	for _, tt := range invalidGrants() {
		grants = append(grants, fixture{tt.name + ": " + tt.unsaid, tt.value, tt.unsaid == ""})
	}
	for _, v := range validRefunds() {
		refunds = append(refunds, fixture{"valid", v, false})
	}
	for _, tt := range invalidRefunds() {
		refunds = append(refunds, fixture{tt.name + ": " + tt.unsaid, tt.value, tt.unsaid == ""})
	}
	for file, fixtures := range map[string][]fixture{schemas.PaymentSucceeded: payments, schemas.QuotaGrants: grants, schemas.PaymentRefunded: refunds} {
		s := schemas.MustCompile(file)
		for _, f := range fixtures {
			if err := s.Validate([]byte(f.value)); (err != nil) != f.refused {
				t.Errorf("%s: %s (%s): refused %v, want %v: %v", file, f.value, f.name, err != nil, f.refused, err)
			}
		}
	}
}

// Every reserved prefix is refused by both schemas, as event_id and grant_id.
func TestSchemasRefuseReservedPrefixes(t *testing.T) {
	payments, grants := schemas.MustCompile(schemas.PaymentSucceeded), schemas.MustCompile(schemas.QuotaGrants)
	for _, p := range reservedPrefixes {
		if err := payments.Validate([]byte(replaceIn(valid, `"evt-1"`, `"`+p+`x"`))); err == nil {
			t.Errorf("%s takes event_id %sx", schemas.PaymentSucceeded, p)
		}
		if err := grants.Validate([]byte(replaceIn(validGrant, `"plan-2026-12:m-42"`, `"`+p+`x"`))); err == nil {
			t.Errorf("%s takes grant_id %sx", schemas.QuotaGrants, p)
		}
	}
}

// What the decoder takes beyond RFC 3339 and JSON's own field names (Go's
// parsers are lenient there), the schemas refuse: producers write the
// contract, and the worker does not refuse what it always took.
func TestDecoderLeniencyBeyondTheSchemas(t *testing.T) {
	payments := schemas.MustCompile(schemas.PaymentSucceeded)
	for _, v := range []string{
		replaceIn(valid, `2026-11-29T07:00:00Z`, `2026-11-29T07:00:00,5Z`),    // a comma before the fraction
		replaceIn(valid, `2026-11-29T07:00:00Z`, `2026-11-29T07:00:00+24:00`), // an offset of 24 hours
		replaceIn(valid, `"event_id"`, `"Event_ID"`),                          // field names matched case-insensitively
	} {
		if _, err := Decode(nil, []byte(v)); err != nil {
			t.Errorf("the decoder refuses %s: %v", v, err)
		}
		if err := payments.Validate([]byte(v)); err == nil {
			t.Errorf("the schema takes %s", v)
		}
	}
}

// Encode writes what the schemas take.
func TestEncodeHoldsAgainstSchemas(t *testing.T) {
	e, err := Decode(nil, []byte(valid))
	if err != nil {
		t.Fatal(err)
	}
	if err := schemas.MustCompile(schemas.PaymentSucceeded).Validate(e.Encode()); err != nil {
		t.Errorf("%s: %v", e.Encode(), err)
	}
	refunds := schemas.MustCompile(schemas.PaymentRefunded)
	for _, v := range validRefunds() {
		r, err := DecodeRefund(nil, []byte(v))
		if err != nil {
			t.Fatal(err)
		}
		if err := refunds.Validate(r.Encode()); err != nil {
			t.Errorf("%s: %v", r.Encode(), err)
		}
	}
	grants := schemas.MustCompile(schemas.QuotaGrants)
	for _, v := range validGrants() {
		g, err := DecodeGrant(nil, []byte(v))
		if err != nil {
			t.Fatal(err)
		}
		if err := grants.Validate(g.Encode()); err != nil {
			t.Errorf("%s: %v", g.Encode(), err)
		}
	}
}
