package deduct

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/quota"
)

// A pending deduction prints in snake_case, its time in UTC and its age in ms.
func TestPendingJSON(t *testing.T) {
	at := time.Date(2026, 11, 29, 15, 0, 0, 0, time.FixedZone("CST", 8*3600))
	b, err := json.Marshal(Pending{Pending: quota.Pending{EventID: "evt-1", Amount: 3, At: at}, Age: 1500 * time.Millisecond, InLedger: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"event_id":"evt-1","amount":3,"at":"2026-11-29T07:00:00Z","age_ms":1500,"in_ledger":true}`; string(b) != want {
		t.Fatalf("got %s\nwant %s", b, want)
	}
}
