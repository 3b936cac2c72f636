package quotaevent

import (
	"testing"
	"time"

	"github.com/quotaflow/billing/schemas"
)

// The published schema takes a message of every type the worker writes, as
// Encode renders it, and refuses what no ledger row announces.
func TestSchemaTakesEveryType(t *testing.T) {
	schema := schemas.MustCompile(schemas.QuotaEvents)
	at := time.Date(2026, 12, 1, 21, 40, 0, 123456000, time.UTC)
	at1000, at0 := int64(1000), int64(0)
	tests := []struct {
		name string
		e    Event
		ok   bool
	}{
		{"low", NewEvent(Low, "m-42", "evt-9", 1003, 998, &at1000, at), true},
		{"depleted", NewEvent(Depleted, "m-42", "evt-9", 3, 0, &at0, at), true},
		{"recovered", NewEvent(Recovered, "m-42", "g-1", 0, 1500, &at1000, at), true},
		{"granted", NewEvent(Granted, "m-42", "g-1", 0, 1500, nil, at), true},
		{"expired", NewEvent(Expired, "m-42", "expire:g-1", 700, 200, nil, at), true},
		{"overage billed", NewEvent(OverageBilled, "m-42", "billed:g-2", -300, 0, nil, at), true},
		{"deducted", NewEvent(Deducted, "m-42", "evt-9", 1003, 998, nil, at), true},
		{"rejected", NewEvent(Rejected, "m-42", "evt-9", 3, 3, nil, at), true},
		{"low without a threshold", NewEvent(Low, "m-42", "evt-9", 1003, 998, nil, at), false},
		{"granted with a threshold", NewEvent(Granted, "m-42", "g-1", 0, 1500, &at1000, at), false},
		{"billed overage not back at zero", NewEvent(OverageBilled, "m-42", "billed:g-2", -300, 200, nil, at), false},
		{"billed overage from zero", NewEvent(OverageBilled, "m-42", "billed:g-2", 0, 0, nil, at), false},
		{"unknown type", NewEvent("quota.repaid", "m-42", "g-2", -300, 0, nil, at), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := Encode(tt.e)
			if err := schema.Validate(msg); (err == nil) != tt.ok {
				t.Fatalf("%s: valid %v, want %v (%v)", msg, err == nil, tt.ok, err)
			}
		})
	}
}
