package outbox

import (
	"bytes"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/quotaflow/billing/internal/quotaevent"
)

// The published schema takes a message of every type the worker writes, as
// Encode renders it, and refuses what no ledger row announces.
func TestSchemaTakesEveryType(t *testing.T) {
	schema := compileSchema(t)
	at := time.Date(2026, 12, 1, 21, 40, 0, 123456000, time.UTC)
	at1000, at0 := int64(1000), int64(0)
	tests := []struct {
		name string
		e    quotaevent.Event
		ok   bool
	}{
		{"low", quotaevent.NewEvent(quotaevent.Low, "m-42", "evt-9", 1003, 998, &at1000, at), true},
		{"depleted", quotaevent.NewEvent(quotaevent.Depleted, "m-42", "evt-9", 3, 0, &at0, at), true},
		{"recovered", quotaevent.NewEvent(quotaevent.Recovered, "m-42", "g-1", 0, 1500, &at1000, at), true},
		{"granted", quotaevent.NewEvent(quotaevent.Granted, "m-42", "g-1", 0, 1500, nil, at), true},
		{"expired", quotaevent.NewEvent(quotaevent.Expired, "m-42", "expire:g-1", 700, 200, nil, at), true},
		{"overage billed", quotaevent.NewEvent(quotaevent.OverageBilled, "m-42", "billed:g-2", -300, 0, nil, at), true},
		{"deducted", quotaevent.NewEvent(quotaevent.Deducted, "m-42", "evt-9", 1003, 998, nil, at), true},
		{"rejected", quotaevent.NewEvent(quotaevent.Rejected, "m-42", "evt-9", 3, 3, nil, at), true},
		{"low without a threshold", quotaevent.NewEvent(quotaevent.Low, "m-42", "evt-9", 1003, 998, nil, at), false},
		{"granted with a threshold", quotaevent.NewEvent(quotaevent.Granted, "m-42", "g-1", 0, 1500, &at1000, at), false},
		{"billed overage not back at zero", quotaevent.NewEvent(quotaevent.OverageBilled, "m-42", "billed:g-2", -300, 200, nil, at), false},
		{"billed overage from zero", quotaevent.NewEvent(quotaevent.OverageBilled, "m-42", "billed:g-2", 0, 0, nil, at), false},
		{"unknown type", quotaevent.NewEvent("quota.repaid", "m-42", "g-2", -300, 0, nil, at), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := quotaevent.Encode(tt.e)
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(msg))
			if err != nil {
				t.Fatal(err)
			}
			if err := schema.Validate(doc); (err == nil) != tt.ok {
				t.Fatalf("%s: valid %v, want %v (%v)", msg, err == nil, tt.ok, err)
			}
		})
	}
}
