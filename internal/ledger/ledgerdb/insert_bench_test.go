package ledgerdb

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/testenv"
)

// BenchmarkInsertIndexes is what the ledger's secondary indexes cost per row
// on this server: transactions (BEGIN, one prepared 1,024-row INSERT, COMMIT)
// into quota_ledger as migrated, then with an index dropped, and with the
// unique key on a 16-byte hash of event_id (MD5, a stored generated column)
// instead of on event_id itself. Each case starts
// from an empty table (about 200,000 rows at 200x), so every index stays
// cached: the cost of a large ledger is load's --ledger-rows. event_ids are
// random (UUIDv4-like).
//
//	go test -run '^$' -bench InsertIndexes -benchtime 200x ./internal/ledger/
func BenchmarkInsertIndexes(b *testing.B) {
	const rowsPerInsert = 1024
	for _, tc := range []struct {
		name  string
		alter string
	}{
		{"all", ""},
		{"event_id-only", "DROP INDEX quota_ledger_merchant_seq"},
		{"merchant-only", "DROP INDEX quota_ledger_event_id"},
		{"primary-only", "DROP INDEX quota_ledger_merchant_seq, DROP INDEX quota_ledger_event_id"},
		{"event_hash", "DROP INDEX quota_ledger_event_id, ADD COLUMN event_hash BINARY(16) AS (UNHEX(MD5(event_id))) STORED, ADD UNIQUE KEY quota_ledger_event_hash (event_hash)"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			db := testenv.NewMySQL(b)
			ctx := context.Background()
			if tc.alter != "" {
				if _, err := db.SQL.ExecContext(ctx, "ALTER TABLE quota_ledger "+tc.alter); err != nil {
					b.Fatal(err)
				}
			}
			query := insertSQL(rowsPerInsert)
			stmt, err := db.SQL.PrepareContext(ctx, query)
			if err != nil {
				b.Fatal(err)
			}
			defer stmt.Close()
			rng := rand.New(rand.NewPCG(1, 2))
			now := time.Now().UTC()
			var id int64
			rows := make([]ledger.Row, rowsPerInsert)
			for b.Loop() {
				b.StopTimer()
				for i := range rows {
					id++
					after := int64(1000)
					rows[i] = ledger.Row{ID: id, EventID: fmt.Sprintf("%016x-%016x", rng.Uint64(), rng.Uint64()),
						MerchantID: fmt.Sprintf("m-%06d", rng.IntN(1000)), Kind: ledger.KindDebit, Amount: 1 + rng.Int64N(50),
						BalanceAfter: &after, Reason: ledger.ReasonPayment, PaymentID: fmt.Sprintf("pay-%d", id), Source: "pc",
						OccurredAt: now, CreatedAt: now}
				}
				args := insertArgs(rows)
				b.StartTimer()
				tx, err := db.SQL.BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := tx.StmtContext(ctx, stmt).ExecContext(ctx, args...); err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rowsPerInsert)/1000, "µs/row")
		})
	}
}
