package idgen

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/testenv"
)

// ledgerRow is the shape the ledger package's model needs: an ID primary key
// with auto-increment off (GORM assumes it for an integer field named ID).
type ledgerRow struct {
	ID         ID `gorm:"primaryKey;autoIncrement:false"`
	EventID    string
	MerchantID string
	Kind       string
	Amount     int64
	OccurredAt time.Time
}

func (ledgerRow) TableName() string { return "quota_ledger" }

// TestGORMRoundTrip fills a batch insert's IDs with one NextIDs call and
// reads them back from the real quota_ledger BIGINT column.
func TestGORMRoundTrip(t *testing.T) {
	db := testenv.NewMySQL(t)
	g := newTestGenerator(t, 1023, Options{})
	ids := make([]ID, 700)
	if err := g.NextIDs(ids); err != nil {
		t.Fatal(err)
	}
	rows := make([]ledgerRow, len(ids))
	for i := range rows {
		rows[i] = ledgerRow{ID: ids[i], EventID: fmt.Sprintf("evt-%d", i), MerchantID: "m-1", Kind: "debit",
			Amount: 1, OccurredAt: time.Now().UTC()}
	}
	if err := db.DB.CreateInBatches(rows, 250).Error; err != nil {
		t.Fatal(err)
	}
	var back []ledgerRow
	if err := db.DB.Order("id").Find(&back).Error; err != nil {
		t.Fatal(err)
	}
	got := make([]ID, len(back))
	for i, r := range back {
		got[i] = r.ID
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("read back %d IDs, not the %d inserted in order", len(got), len(ids))
	}
	// database/sql directly, and through JSON.
	var one ID
	if err := db.SQL.QueryRow("SELECT id FROM quota_ledger WHERE event_id = 'evt-0'").Scan(&one); err != nil || one != ids[0] {
		t.Fatalf("Scan = %d, %v; want %d", one, err, ids[0])
	}
	b, err := json.Marshal(back[0])
	if err != nil {
		t.Fatal(err)
	}
	var decoded ledgerRow
	if err := json.Unmarshal(b, &decoded); err != nil || decoded.ID != ids[0] {
		t.Fatalf("JSON round trip of %s: %d, %v", b, decoded.ID, err)
	}
	if p := Decode(one); p.Worker != 1023 || time.Since(p.Time) > time.Minute {
		t.Fatalf("stored ID decodes to %+v", p)
	}
}
