package bench

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/sqltx"
)

// inTx runs fn in a transaction, again when the server rolled it back
// (deadlock) or timed out a lock wait. retries counts the retries.
func inTx(ctx context.Context, db *sql.DB, retries *atomic.Int64, fn func(*sql.Tx) error) error {
	return sqltx.RetryDeadlocks(ctx, func() { retries.Add(1) }, func() error { return sqltx.Run(ctx, db, nil, fn) })
}

// nextSeq moves a merchant's balance row by debit and takes the seq of its
// next ledger row, under the row's lock (LAST_INSERT_ID hands the new value
// back in the statement's reply), behind guard ("" for none, else a condition
// with one placeholder for the debit). found is false when no row matched.
func nextSeq(ctx context.Context, tx *sql.Tx, merchantID string, debit int64, guard string) (seq int64, found bool, err error) {
	q := "UPDATE merchant_balance SET debited = debited + ?, seq = LAST_INSERT_ID(seq + 1) WHERE merchant_id = ?"
	args := []any{debit, merchantID}
	if guard != "" {
		q, args = q+" AND "+guard, append(args, debit)
	}
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, false, fmt.Errorf("bench: move the balance of %s: %w", merchantID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return 0, false, err
	}
	seq, err = res.LastInsertId()
	return seq, err == nil, err
}

// insertLedger writes the one ledger row of e, the merchant's seq-th.
// balanceAfter < 0 stores NULL and seq 0 none (an unknown merchant).
func insertLedger(ctx context.Context, tx *sql.Tx, ids ledgerdb.IDSource, e event.PaymentSucceeded, kind ledger.Kind, reason string, balanceAfter, seq int64) error {
	var id [1]int64
	if err := ids.NextIDs(id[:]); err != nil {
		return fmt.Errorf("bench: ledger id: %w", err)
	}
	var after, seqArg any // NULL unless known
	if balanceAfter >= 0 {
		after = balanceAfter
	}
	if seq > 0 {
		seqArg = seq
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO quota_ledger (id, event_id, merchant_id, kind, amount, balance_after, reason, payment_id, source, occurred_at, created_at, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		id[0], e.EventID, e.MerchantID, string(kind), e.Amount, after, reason, e.PaymentID, string(e.Source), e.OccurredAt, time.Now().UTC(), seqArg); err != nil {
		return fmt.Errorf("bench: insert ledger row %s: %w", e.EventID, err)
	}
	return nil
}
