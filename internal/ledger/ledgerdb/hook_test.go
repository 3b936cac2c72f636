package ledgerdb

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/ledger"
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

// A batch takes its ids in one call, not one per row.
func TestCommitTakesIDsInBulk(t *testing.T) {
	db := testenv.NewMySQL(t)
	ids := &countingIDs{}
	s, err := New(db.SQL, ids, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL.Exec("INSERT INTO merchant_balance (merchant_id, credited) VALUES ('m-1', 100)"); err != nil {
		t.Fatal(err)
	}
	rows := make([]ledger.Row, 50)
	for i := range rows {
		rows[i] = ledger.Row{EventID: "bulk-" + string(rune('a'+i%26)) + string(rune('a'+i/26)), MerchantID: "m-1", Kind: ledger.KindDebit, Amount: 1, Reason: ledger.ReasonPayment, OccurredAt: time.Now()}
	}
	if err := s.Commit(t.Context(), rows); err != nil {
		t.Fatal(err)
	}
	if ids.calls.Load() != 1 {
		t.Fatalf("%d IDSource calls for one batch of 50", ids.calls.Load())
	}
}
