package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/writepath"
)

// Pipeline is the batched write path (internal/deduct): per lane batch, the
// batch's merchant locks in sorted order, one query for events already in the
// ledger, one pipelined round of Lua deductions, one MySQL transaction for
// the whole batch (each merchant's balance moved once, behind the overdraft
// guard), one round of Lua confirms.
type Pipeline struct {
	ttl   time.Duration
	locks *lock.Client
	d     *deduct.Deductor
	// Outcomes of the events, by deduct.Outcome.
	applied, insufficient, duplicate, unknown atomic.Int64
}

// Batched implements Strategy: lane batches.
func (s *Pipeline) Batched() bool { return true }

// RedisBalances implements Strategy.
func (s *Pipeline) RedisBalances() bool { return true }

// Setup implements Strategy. It wires internal/deduct the way the worker does:
// the worker's lock adapter (writepath.MerchantLocks), a ledgerdb.Store on the
// strategy's database, the strategy's Redis prefix. Redis balances are hydrated lazily by the
// Deductor (a missing quota hash is read from merchant_balance under the lock).
func (s *Pipeline) Setup(_ context.Context, env *Env) error {
	locks, err := lock.New(env.Redis, lock.Options{Logger: env.Log})
	if err != nil {
		return fmt.Errorf("bench: pipeline lock client: %w", err)
	}
	store, err := ledgerdb.New(env.DB, env.IDs, nil, ledgerdb.Options{})
	if err != nil {
		return errors.Join(fmt.Errorf("bench: pipeline ledger: %w", err), locks.Close())
	}
	d, err := deduct.New(env.Redis, env.Keys, writepath.MerchantLocks(locks, env.Keys, s.ttl), store, env.Log, nil, deduct.Options{})
	if err != nil {
		return errors.Join(fmt.Errorf("bench: pipeline deductor: %w", err), locks.Close())
	}
	s.locks, s.d = locks, d
	return nil
}

// Apply implements Strategy. A permanent per-event failure (conflict, refused
// value) is an error here: the bench workload has none, so one means a bug.
func (s *Pipeline) Apply(ctx context.Context, batch []event.PaymentSucceeded) error {
	results, err := s.d.Apply(ctx, batch)
	if err != nil {
		return err
	}
	for i, r := range results {
		switch r.Outcome {
		case deduct.Applied:
			s.applied.Add(1)
		case deduct.Insufficient:
			s.insufficient.Add(1)
		case deduct.Duplicate:
			s.duplicate.Add(1)
		case deduct.UnknownMerchant:
			s.unknown.Add(1)
		default:
			return fmt.Errorf("bench: event %s: %s: %w", batch[i].EventID, r.Outcome, r.Err)
		}
	}
	return nil
}

// Counters implements Strategy.
func (s *Pipeline) Counters() map[string]int64 {
	return map[string]int64{"applied": s.applied.Load(), "insufficient": s.insufficient.Load(),
		"duplicate": s.duplicate.Load(), "unknown_merchant": s.unknown.Load()}
}

// Close implements Strategy.
func (s *Pipeline) Close() error {
	if s.locks == nil {
		return nil
	}
	return s.locks.Close()
}
