package bench

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/quotaflow/billing/internal/event"
)

// Ledger row kinds and reasons, as internal/ledger writes them.
const (
	kindCredit            = "credit"
	kindDebit             = "debit"
	kindRejected          = "rejected"
	reasonPayment         = "payment"
	reasonGrant           = "grant"
	reasonInsufficient    = "insufficient"
	reasonUnknownMerchant = "unknown_merchant"
)

const insertLedgerSQL = `INSERT INTO quota_ledger
	(id, event_id, merchant_id, kind, amount, balance_after, reason, payment_id, source, occurred_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// insertLedger writes the one ledger row of e. balanceAfter < 0 stores NULL.
func insertLedger(ctx context.Context, tx *sql.Tx, ids IDSource, e event.PaymentSucceeded, kind, reason string, balanceAfter int64) error {
	id, err := ids.NextID()
	if err != nil {
		return fmt.Errorf("bench: ledger id: %w", err)
	}
	var after sql.NullInt64
	if balanceAfter >= 0 {
		after = sql.NullInt64{Int64: balanceAfter, Valid: true}
	}
	if _, err := tx.ExecContext(ctx, insertLedgerSQL, id, e.EventID, e.MerchantID, kind, e.Amount,
		after, reason, e.PaymentID, string(e.Source), e.OccurredAt); err != nil {
		return fmt.Errorf("bench: insert ledger row %s: %w", e.EventID, err)
	}
	return nil
}
