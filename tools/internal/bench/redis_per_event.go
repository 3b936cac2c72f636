package bench

import (
	"context"
	"crypto/rand"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/quota"
)

// DefaultLockTTL is the merchant locks' TTL of redis-per-event and pipeline.
const DefaultLockTTL = 30 * time.Second

// The lock of redis-per-event is retried after lockRetryDelay, jittered
// +-50%, for at most lockMaxWait.
const (
	lockRetryDelay = time.Millisecond
	lockMaxWait    = 30 * time.Second
)

// errLockWait means the merchant lock could not be taken within lockMaxWait.
var errLockWait = errors.New("bench: merchant lock not obtained in time")

// errGuard means MySQL refused a debit that Redis allowed: Redis over-reported.
var errGuard = errors.New("bench: balance guard refused a debit that Redis allowed")

// RedisPerEvent is the original design's "after": per event, take the merchant lock in
// Redis (SET NX PX with a random token, retried after a short sleep), deduct
// atomically in Lua, write the ledger row and move merchant_balance in one
// MySQL transaction, and release the lock with a compare-and-delete. The
// Redis balances are hydrated from MySQL before the run, each under its lock
// (quota.Hydrate, as the worker does).
type RedisPerEvent struct {
	ttl                    time.Duration
	env                    *Env
	deduct, refund, unlock *redis.Script
	lockRetries            atomic.Int64
	txRetries              atomic.Int64
}

var (
	//go:embed deduct.lua
	deductLua string
	//go:embed refund.lua
	refundLua string
	//go:embed unlock.lua
	unlockLua string
)

func newRedisPerEvent(lockTTL time.Duration) *RedisPerEvent {
	return &RedisPerEvent{ttl: lockTTL, deduct: redis.NewScript(deductLua), refund: redis.NewScript(refundLua),
		unlock: redis.NewScript(unlockLua)}
}

// Batched implements Strategy: one event per call.
func (s *RedisPerEvent) Batched() bool { return false }

// RedisBalances implements Strategy.
func (s *RedisPerEvent) RedisBalances() bool { return true }

// Setup implements Strategy: it hydrates every merchant's balance.
func (s *RedisPerEvent) Setup(ctx context.Context, env *Env) error {
	s.env = env
	var balances []ledger.Balance
	if err := env.GORM.WithContext(ctx).Find(&balances).Error; err != nil {
		return fmt.Errorf("bench: read balances: %w", err)
	}
	for _, b := range balances {
		err := s.locked(ctx, b.MerchantID, func(lockKey, token string) error {
			c := quota.Hydrate(env.Keys.Quota(b.MerchantID), lockKey, token, b.Available(), b.Policy().RedisFloor(), time.Now())
			quota.Run(ctx, env.Redis, c)
			_, err := c.Wrote()
			return err
		})
		if err != nil {
			return fmt.Errorf("bench: hydrate %s: %w", b.MerchantID, err)
		}
	}
	return nil
}

// Close implements Strategy.
func (s *RedisPerEvent) Close() error { return nil }

// Counters implements Strategy.
func (s *RedisPerEvent) Counters() map[string]int64 {
	return map[string]int64{"lock_retries": s.lockRetries.Load(), "tx_retries": s.txRetries.Load()}
}

// Apply implements Strategy.
func (s *RedisPerEvent) Apply(ctx context.Context, batch []event.PaymentSucceeded) error {
	for _, e := range batch {
		if err := s.applyOne(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

// locked runs fn under the merchant's lock.
func (s *RedisPerEvent) locked(ctx context.Context, merchantID string, fn func(lockKey, token string) error) (err error) {
	lockKey := s.env.Keys.Lock(merchantID)
	token := rand.Text()
	if err := s.lock(ctx, lockKey, token); err != nil {
		return err
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if uerr := s.unlock.Run(uctx, s.env.Redis, []string{lockKey}, token).Err(); uerr != nil && err == nil {
			err = fmt.Errorf("bench: unlock %s: %w", lockKey, uerr)
		}
	}()
	return fn(lockKey, token)
}

func (s *RedisPerEvent) applyOne(ctx context.Context, e event.PaymentSucceeded) error {
	return s.locked(ctx, e.MerchantID, func(string, string) error {
		quotaKey := s.env.Keys.Quota(e.MerchantID)
		res, err := s.deduct.Run(ctx, s.env.Redis, []string{quotaKey}, e.Amount).Int64Slice()
		if err != nil {
			return fmt.Errorf("bench: deduct %s: %w", quotaKey, err)
		}
		switch res[0] {
		case -1:
			return fmt.Errorf("bench: %s is missing: the balance was not hydrated", quotaKey)
		case 0:
			return inTx(ctx, s.env.DB, &s.txRetries, func(tx *sql.Tx) error {
				seq, _, err := nextSeq(ctx, tx, e.MerchantID, 0, "")
				if err != nil {
					return err
				}
				return insertLedger(ctx, tx, s.env.IDs, e, ledger.KindRejected, ledger.ReasonInsufficient, res[1], seq)
			})
		}
		err = inTx(ctx, s.env.DB, &s.txRetries, func(tx *sql.Tx) error { return s.record(ctx, tx, e, res[1]) })
		if err != nil {
			// MySQL did not take the debit: give the quota back so Redis matches it again.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if rerr := s.refund.Run(rctx, s.env.Redis, []string{quotaKey}, e.Amount).Err(); rerr != nil {
				return errors.Join(err, fmt.Errorf("bench: refund %s: %w", quotaKey, rerr))
			}
			return err
		}
		return nil
	})
}

func (s *RedisPerEvent) record(ctx context.Context, tx *sql.Tx, e event.PaymentSucceeded, remainAfter int64) error {
	seq, found, err := nextSeq(ctx, tx, e.MerchantID, e.Amount, "credited - debited >= ?")
	switch {
	case err != nil:
		return err
	case !found:
		return fmt.Errorf("%w: merchant %s, amount %d", errGuard, e.MerchantID, e.Amount)
	}
	return insertLedger(ctx, tx, s.env.IDs, e, ledger.KindDebit, ledger.ReasonPayment, remainAfter, seq)
}

// lock takes lockKey with SET NX PX, sleeping lockRetryDelay +-50% between
// attempts, for at most lockMaxWait.
func (s *RedisPerEvent) lock(ctx context.Context, lockKey, token string) error {
	try := func() error {
		ok, err := s.env.Redis.SetNX(ctx, lockKey, token, s.ttl).Result()
		switch {
		case err != nil:
			return backoff.Permanent(fmt.Errorf("bench: lock %s: %w", lockKey, err))
		case !ok:
			return errLockWait
		}
		return nil
	}
	b := backoff.NewExponentialBackOff(backoff.WithInitialInterval(lockRetryDelay), backoff.WithMultiplier(1),
		backoff.WithMaxElapsedTime(lockMaxWait))
	err := backoff.RetryNotify(try, backoff.WithContext(b, ctx), func(error, time.Duration) { s.lockRetries.Add(1) })
	if errors.Is(err, errLockWait) {
		return fmt.Errorf("%w: %s after %v", errLockWait, lockKey, lockMaxWait)
	}
	return err
}
