package ledgerdb

import (
	"context"
	"fmt"
	"testing"

	"github.com/quotaflow/billing/internal/ledger"
)

// A merchant's page holds its rows only, above the cursor, in seq order (1,
// 2, 3 ...), and is one range of the (merchant_id, seq) index, not a scan of
// the table.
func TestMerchantRows(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	const merchants, each = 20, 30
	for m := range merchants {
		grant(t, s, fmt.Sprintf("m-%d", m), each)
	}
	for i := range each { // interleaved ids: each commit writes a row of every merchant
		var rows []ledger.Row
		for m := range merchants {
			rows = append(rows, debit(fmt.Sprintf("e-%d-%d", m, i), fmt.Sprintf("m-%d", m), 1))
		}
		if err := s.Commit(ctx, rows); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.MerchantRows(ctx, "m-3", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1+each {
		t.Fatalf("m-3 has %d rows, want %d", len(all), 1+each)
	}
	for i, r := range all {
		if r.MerchantID != "m-3" || *r.Seq != int64(i+1) {
			t.Fatalf("row %d: %+v", i, r)
		}
	}
	page, err := s.MerchantRows(ctx, "m-3", *all[9].Seq, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 5 || page[0].ID != all[10].ID || page[4].ID != all[14].ID {
		t.Fatalf("page after row 9: %+v", page)
	}

	if _, err := s.db.Exec("ANALYZE TABLE quota_ledger"); err != nil {
		t.Fatal(err)
	}
	plan := explain(t, s, merchantRowsSQL, []any{"m-3", *all[9].Seq, 100})
	if len(plan) != 1 || plan[0]["key"] != "quota_ledger_merchant_seq" || plan[0]["type"] != "range" {
		t.Fatalf("EXPLAIN %s: %+v, want a range of quota_ledger_merchant_seq", merchantRowsSQL, plan)
	}
}
