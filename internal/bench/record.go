package bench

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
)

// inTx runs fn in a transaction, again when the server rolled it back
// (deadlock) or timed out a lock wait. retries counts the retries.
func inTx(ctx context.Context, db *sql.DB, retries *atomic.Int64, fn func(*sql.Tx) error) error {
	return ledger.RetryDeadlocks(ctx, func() { retries.Add(1) }, func() error { return ledger.InTx(ctx, db, nil, fn) })
}

// insertLedger writes the one ledger row of e. balanceAfter < 0 stores NULL
// (an unknown merchant).
func insertLedger(ctx context.Context, tx *sql.Tx, ids ledger.IDSource, e event.PaymentSucceeded, kind ledger.Kind, reason string, balanceAfter int64) error {
	var id [1]int64
	if err := ids.NextIDs(id[:]); err != nil {
		return fmt.Errorf("bench: ledger id: %w", err)
	}
	row := ledger.Row{ID: id[0], EventID: e.EventID, MerchantID: e.MerchantID, Kind: kind, Amount: e.Amount, Reason: reason,
		PaymentID: e.PaymentID, Source: string(e.Source), OccurredAt: e.OccurredAt, CreatedAt: time.Now().UTC()}
	if balanceAfter >= 0 {
		row.BalanceAfter = &balanceAfter
	}
	query, args := ledger.InsertStatement([]ledger.Row{row})
	if _, err := tx.ExecContext(ctx, query, args...); err != nil {
		return fmt.Errorf("bench: insert ledger row %s: %w", e.EventID, err)
	}
	return nil
}
