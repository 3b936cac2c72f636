package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/lock"
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
	applied, insufficient, duplicate, unknown counter
}

// NewPipeline returns the pipeline strategy; its merchant locks live for
// lockTTL (renewed by their watchdogs), default DefaultLockTTL.
func NewPipeline(lockTTL time.Duration) *Pipeline {
	if lockTTL <= 0 {
		lockTTL = DefaultLockTTL
	}
	return &Pipeline{ttl: lockTTL}
}

// Name implements Strategy.
func (s *Pipeline) Name() string { return NamePipeline }

// Batched implements Strategy: lane batches.
func (s *Pipeline) Batched() bool { return true }

// ===== REGISTRATION POINT: pipeline strategy =====
// Setup wires internal/deduct the way the worker will: an internal/lock Client
// behind the deduct.Locker adapter below, a ledger.Store on the strategy's
// database, the strategy's Redis prefix. When internal/app (or deduct) ships
// its own lock adapter, use that here instead of lockerAdapter.

// Setup implements Strategy. Redis balances are hydrated lazily by the
// Deductor (a missing quota hash is read from merchant_balance under the lock).
func (s *Pipeline) Setup(_ context.Context, env *Env) error {
	locks, err := lock.New(env.Redis, env.Keys, lock.Options{Logger: env.Log})
	if err != nil {
		return fmt.Errorf("bench: pipeline lock client: %w", err)
	}
	store, err := ledger.New(env.GORM, env.IDs, nil, ledger.Options{})
	if err != nil {
		return errors.Join(fmt.Errorf("bench: pipeline ledger: %w", err), locks.Close())
	}
	d, err := deduct.New(env.Redis, env.Keys, lockerAdapter{c: locks, env: env, ttl: s.ttl}, store, env.Log, nil, deduct.Options{})
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
			s.applied.inc()
		case deduct.Insufficient:
			s.insufficient.inc()
		case deduct.Duplicate:
			s.duplicate.inc()
		case deduct.UnknownMerchant:
			s.unknown.inc()
		default:
			return fmt.Errorf("bench: event %s: %s: %w", batch[i].EventID, r.Outcome, r.Err)
		}
	}
	return nil
}

// Counters implements Counters.
func (s *Pipeline) Counters() map[string]int64 {
	return map[string]int64{"applied": s.applied.load(), "insufficient": s.insufficient.load(),
		"duplicate": s.duplicate.load(), "unknown_merchant": s.unknown.load()}
}

// Close implements Strategy.
func (s *Pipeline) Close() error {
	if s.locks == nil {
		return nil
	}
	return s.locks.Close()
}

// lockerAdapter is deduct.Locker on internal/lock: wait for the merchant's
// lock, start its watchdog, and hand out the watchdog's context (cancelled
// when the lock is lost or released).
type lockerAdapter struct {
	c   *lock.Client
	env *Env
	ttl time.Duration
}

func (a lockerAdapter) Acquire(ctx context.Context, merchantID string) (deduct.HeldLock, error) {
	l, err := a.c.Wait(ctx, a.env.Keys.Lock(merchantID), a.ttl)
	if err != nil {
		return nil, err
	}
	return heldLock{Lock: l, ctx: l.Watch(ctx)}, nil
}

// AcquireAll takes the merchants' locks in their order, one round trip when
// none is contended (lock.Client.WaitMany), with one watchdog for all of them
// (lock.Client.WatchMany): each lock's Context ends when any of them is lost
// or released, which is what a batch needs.
func (a lockerAdapter) AcquireAll(ctx context.Context, merchantIDs []string) ([]deduct.HeldLock, error) {
	keys := make([]string, len(merchantIDs))
	for i, id := range merchantIDs {
		keys[i] = a.env.Keys.Lock(id)
	}
	locks, err := a.c.WaitMany(ctx, keys, a.ttl)
	if err != nil {
		return nil, err
	}
	wctx := a.c.WatchMany(ctx, locks)
	held := make([]deduct.HeldLock, len(locks))
	for i, l := range locks {
		held[i] = heldLock{Lock: l, ctx: wctx}
	}
	return held, nil
}

// ReleaseAll releases the locks in one round trip (lock.Client.ReleaseMany).
func (a lockerAdapter) ReleaseAll(ctx context.Context, held []deduct.HeldLock) error {
	locks := make([]*lock.Lock, 0, len(held))
	var errs []error
	for _, h := range held {
		if hl, ok := h.(heldLock); ok {
			locks = append(locks, hl.Lock)
		} else {
			errs = append(errs, h.Release(ctx))
		}
	}
	return errors.Join(append(errs, a.c.ReleaseMany(ctx, locks))...)
}

type heldLock struct {
	*lock.Lock
	ctx context.Context
}

func (h heldLock) Context() context.Context { return h.ctx }
