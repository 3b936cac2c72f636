package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
)

// RowLock is the original design's "before": one MySQL transaction per event that locks
// the merchant's balance row (SELECT ... FOR UPDATE), checks it, moves it and
// writes the ledger row. Every event of a merchant waits for the previous
// one's commit, holding a connection while it waits.
type RowLock struct {
	env     *Env
	retries atomic.Int64
}

// Batched implements Strategy: one event per call.
func (s *RowLock) Batched() bool { return false }

// RedisBalances implements Strategy: the balances are MySQL's only.
func (s *RowLock) RedisBalances() bool { return false }

// Setup implements Strategy.
func (s *RowLock) Setup(_ context.Context, env *Env) error {
	s.env = env
	return nil
}

// Close implements Strategy.
func (s *RowLock) Close() error { return nil }

// Counters implements Strategy.
func (s *RowLock) Counters() map[string]int64 {
	return map[string]int64{"tx_retries": s.retries.Load()}
}

// Apply implements Strategy.
func (s *RowLock) Apply(ctx context.Context, batch []event.PaymentSucceeded) error {
	for _, e := range batch {
		if err := inTx(ctx, s.env.DB, &s.retries, func(tx *sql.Tx) error { return s.applyOne(ctx, tx, e) }); err != nil {
			return err
		}
	}
	return nil
}

func (s *RowLock) applyOne(ctx context.Context, tx *sql.Tx, e event.PaymentSucceeded) error {
	var credited, debited int64
	err := tx.QueryRowContext(ctx,
		"SELECT credited, debited FROM merchant_balance WHERE merchant_id = ? FOR UPDATE", e.MerchantID).
		Scan(&credited, &debited)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return insertLedger(ctx, tx, s.env.IDs, e, ledger.KindRejected, ledger.ReasonUnknownMerchant, -1, 0)
	case err != nil:
		return fmt.Errorf("bench: lock balance of %s: %w", e.MerchantID, err)
	}
	remain := credited - debited
	kind, reason, debit := ledger.KindDebit, ledger.ReasonPayment, e.Amount
	if remain < e.Amount {
		kind, reason, debit = ledger.KindRejected, ledger.ReasonInsufficient, 0
	}
	seq, _, err := nextSeq(ctx, tx, e.MerchantID, debit, "")
	if err != nil {
		return err
	}
	return insertLedger(ctx, tx, s.env.IDs, e, kind, reason, remain-debit, seq)
}
