package ledger

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/testenv"
)

type countingIDs struct {
	next  atomic.Int64
	calls atomic.Int64
}

func (c *countingIDs) NextIDs(dst []int64) error {
	c.calls.Add(1)
	for i := range dst {
		dst[i] = 1_000_000 + c.next.Add(1)
	}
	return nil
}

func TestBeforeCreateFillsID(t *testing.T) {
	db := testenv.NewMySQL(t)
	ids := &countingIDs{}
	session := WithIDs(db.DB, ids)
	row := Row{EventID: "hook-1", MerchantID: "m-1", Kind: KindRejected, Amount: 3, Reason: ReasonUnknownMerchant, OccurredAt: time.Now()}
	if err := session.Create(&row).Error; err != nil {
		t.Fatal(err)
	}
	if row.ID != 1_000_001 || ids.calls.Load() != 1 {
		t.Fatalf("id %d after %d calls; want 1000001 after 1", row.ID, ids.calls.Load())
	}
	preset := Row{ID: 42, EventID: "hook-2", MerchantID: "m-1", Kind: KindRejected, Amount: 1, OccurredAt: time.Now()}
	if err := session.Create(&preset).Error; err != nil || preset.ID != 42 || ids.calls.Load() != 1 {
		t.Fatalf("preset id changed to %d (%v), calls %d", preset.ID, err, ids.calls.Load())
	}
	orphan := Row{EventID: "hook-3", MerchantID: "m-1", Kind: KindRejected, Amount: 1, OccurredAt: time.Now()}
	if err := db.DB.Create(&orphan).Error; err == nil {
		t.Fatal("a row without id or IDSource was inserted")
	}
}

// A batch takes its ids in one call, not one per row.
func TestCommitTakesIDsInBulk(t *testing.T) {
	db := testenv.NewMySQL(t)
	ids := &countingIDs{}
	s, err := New(db.DB, ids, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.DB.Exec("INSERT INTO merchant_balance (merchant_id, credited) VALUES ('m-1', 100)").Error; err != nil {
		t.Fatal(err)
	}
	rows := make([]Row, 50)
	for i := range rows {
		rows[i] = Row{EventID: "bulk-" + string(rune('a'+i%26)) + string(rune('a'+i/26)), MerchantID: "m-1", Kind: KindDebit, Amount: 1, Reason: ReasonPayment, OccurredAt: time.Now()}
	}
	if err := s.Commit(t.Context(), rows); err != nil {
		t.Fatal(err)
	}
	if ids.calls.Load() != 1 {
		t.Fatalf("%d IDSource calls for one batch of 50", ids.calls.Load())
	}
}
