package bench

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/sqltx"
)

// rowLock is the seed's "before": MySQL alone, one ledger.Commit (one
// transaction) per event. Its balance UPDATE locks the merchant's row behind
// the overdraft guard, so every event of a merchant waits for the previous
// one's commit, holding a connection while it waits; a debit the guard
// refuses is committed again as a rejection.
type rowLock struct {
	store   *ledgerdb.Store
	retries atomic.Int64
}

func (s *rowLock) Batched() bool       { return false }
func (s *rowLock) RedisBalances() bool { return false }
func (s *rowLock) Close() error        { return nil }

func (s *rowLock) Setup(_ context.Context, env *Env) error {
	s.store = env.Store
	return nil
}

func (s *rowLock) Counters() map[string]int64 {
	return map[string]int64{"tx_retries": s.retries.Load()}
}

func (s *rowLock) Apply(ctx context.Context, batch []event.PaymentSucceeded) error {
	for _, e := range batch {
		err := s.commit(ctx, e, ledger.KindDebit, ledger.ReasonPayment)
		if errors.Is(err, ledger.ErrGuard) {
			err = s.commit(ctx, e, ledger.KindRejected, ledger.ReasonInsufficient)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *rowLock) commit(ctx context.Context, e event.PaymentSucceeded, kind ledger.Kind, reason string) error {
	row := ledger.Row{EventID: e.EventID, MerchantID: e.MerchantID, Kind: kind, Amount: e.Amount, Reason: reason,
		PaymentID: e.PaymentID, Source: string(e.Source), OccurredAt: e.OccurredAt.UTC()}
	return sqltx.RetryDeadlocks(ctx, func() { s.retries.Add(1) }, func() error {
		return s.store.Commit(ctx, []ledger.Row{row})
	})
}
