package quotaevent

import (
	"encoding/json"
	"time"
)

// Message is an event as published on the balance-events topic (JSON; the
// schema is schemas/quota-events.schema.json). Keyed by merchant_id.
type Message struct {
	ID            string    `json:"id"`
	Type          Type      `json:"type"`
	MerchantID    string    `json:"merchant_id"`
	BalanceBefore int64     `json:"balance_before"`
	BalanceAfter  int64     `json:"balance_after"`
	Threshold     *int64    `json:"threshold"`
	CausedBy      string    `json:"caused_by"`
	OccurredAt    time.Time `json:"occurred_at"`
}

// Encode renders e as its message's JSON. It cannot fail: every field is a
// string, an integer or a time within years 1000..9999 (a DATETIME).
func Encode(e Event) []byte {
	v, _ := json.Marshal(Message{
		ID: e.ID, Type: e.Type, MerchantID: e.MerchantID, BalanceBefore: e.BalanceBefore,
		BalanceAfter: e.BalanceAfter, Threshold: e.Threshold, CausedBy: e.CausedBy, OccurredAt: e.OccurredAt.UTC(),
	})
	return v
}
