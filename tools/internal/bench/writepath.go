package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/lock"
)

// DefaultLockTTL is the merchant locks' TTL of redis-per-event and pipeline.
const DefaultLockTTL = 30 * time.Second

// writePath is the worker's write path (internal/deduct wired as the worker
// wires it: internal/lock through deduct.MerchantLocks, the deduct and
// settle scripts, ledger.Commit). Per call: the merchant locks, one query for
// events already recorded, the Lua deductions, one MySQL transaction, the
// Lua confirms. Given single events from a shared queue it is the seed's
// "after" (redis-per-event: a Redis lock and a Lua deduction per event);
// given lane batches it is the pipeline. Redis balances are hydrated lazily,
// under the lock, from merchant_balance.
type writePath struct {
	batched  bool
	ttl      time.Duration
	locks    *lock.Client
	d        *deduct.Deductor
	outcomes sync.Map // deduct.Outcome -> *atomic.Int64
}

func (s *writePath) Batched() bool       { return s.batched }
func (s *writePath) RedisBalances() bool { return true }

func (s *writePath) Setup(_ context.Context, env *Env) error {
	locks, err := lock.New(env.Redis, lock.Options{Logger: env.Log})
	if err != nil {
		return fmt.Errorf("bench: lock client: %w", err)
	}
	d, err := deduct.New(env.Redis, env.Keys, deduct.MerchantLocks(locks, env.Keys, s.ttl), env.Store, env.Log, nil, deduct.Options{})
	if err != nil {
		return fmt.Errorf("bench: deductor: %w", err)
	}
	s.locks, s.d = locks, d
	return nil
}

// Apply is one call of the write path. A permanent per-event failure
// (conflict, refused value) is an error here: the bench workload has none,
// so one means a bug.
func (s *writePath) Apply(ctx context.Context, batch []event.PaymentSucceeded) error {
	results, err := s.d.Apply(ctx, batch)
	if err != nil {
		return err
	}
	for i, r := range results {
		if r.Err != nil {
			return fmt.Errorf("bench: event %s: %s: %w", batch[i].EventID, r.Outcome, r.Err)
		}
		n, _ := s.outcomes.LoadOrStore(r.Outcome, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}
	return nil
}

// Counters are the events by outcome.
func (s *writePath) Counters() map[string]int64 {
	out := map[string]int64{}
	s.outcomes.Range(func(k, v any) bool {
		out[string(k.(deduct.Outcome))] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

func (s *writePath) Close() error {
	if s.locks == nil {
		return nil
	}
	return s.locks.Close()
}
