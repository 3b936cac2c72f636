package deduct

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/quotaflow/billing/internal/failure"
	"github.com/quotaflow/billing/internal/keyspace"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/quota"
	"github.com/quotaflow/billing/internal/tracing"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// ErrLockLost: a merchant lock was lost during the batch (a fenced script found
// another token, or the lock's context ended); apply it again. Never the
// message's fault, so an outage: never dead-lettered.
var ErrLockLost = failure.Outage(errors.New("deduct: merchant lock lost"))

// Locker takes shard locks (deduct.MerchantLocks, on internal/lock).
type Locker interface {
	// Acquire takes the locks of tags (distinct; shard.Tag: the merchant id
	// of an unsharded merchant), all or none, waiting while others hold some,
	// never in a cycle with overlapping callers.
	Acquire(ctx context.Context, tags []string) (Held, error)
}

// Held is the locks of one Acquire.
type Held interface {
	// Keys are the lock keys (keyspace.Lock) in the order of the tags.
	Keys() []string
	// Token is every key's value while held: the scripts' fencing token.
	Token() string
	// Context ends when a lock is lost, and on Release.
	Context() context.Context
	Release(ctx context.Context) error
}

// Ledger is the MySQL side (implemented by *ledgerdb.Store).
type Ledger interface {
	ExistingEvents(ctx context.Context, eventIDs []string) (map[string]ledger.Row, error)
	Balances(ctx context.Context, merchantIDs []string) (map[string]ledger.Balance, error)
	Commit(ctx context.Context, rows []ledger.Row) error
	Grant(ctx context.Context, credits []ledger.Credit) ([]ledger.Credited, error)
	Refund(ctx context.Context, refunds []ledger.Refund) ([]ledger.RefundOutcome, error)
	RefundedAmong(ctx context.Context, eventIDs []string) ([]string, error)
	SetPolicy(ctx context.Context, merchantID string, p ledger.Policy) error
	DueExpiries(ctx context.Context, limit int) ([]string, error)
	DueAmong(ctx context.Context, merchants []string) ([]string, error)
	Expire(ctx context.Context, merchants []string) ([]string, error)
	GrantMerchant(ctx context.Context, id string) (string, error)
	Revoke(ctx context.Context, merchant, id string) (ledger.RevokeOutcome, int64, error)
	Grants(ctx context.Context, merchants []string, ended int) (map[string][]ledger.Grant, error)
}

// Redis is what the Deductor needs of a client (*redis.Client or *redis.ClusterClient).
type Redis interface {
	Pipeline() redis.Pipeliner
}

// Options tunes a Deductor. The zero value is valid.
type Options struct {
	// MaxRedo bounds how often one batch is redone after a stale cache, a
	// concurrent duplicate or a refused value (default 8).
	MaxRedo int
	// Shards tells merchants' shard counts; nil: every merchant has one shard.
	Shards Shards
}

// releaseTimeout bounds unlocking at the end of a batch, which runs even when
// the batch's context has ended.
const releaseTimeout = 5 * time.Second

// Deductor applies batches of payment events. It is safe for concurrent use;
// the merchant locks serialize batches that share a merchant.
type Deductor struct {
	rdb     Redis
	keys    keyspace.Keyspace
	locks   Locker
	ledger  Ledger
	log     *zap.Logger
	metrics *Metrics
	opts    Options
	shards  Shards
	now     func() time.Time

	deductLua, settleLua, dropLua *redis.Script // the protocol's scripts (package doc)

	// afterStep (tests only) runs after each step; an error simulates a crash
	// there: Apply returns at once, abandoning its locks.
	afterStep func(step string) error
}

// New returns a Deductor. log and m may be nil (no logs; unregistered metrics).
func New(rdb Redis, keys keyspace.Keyspace, locks Locker, led Ledger, log *zap.Logger, m *Metrics, opts Options) (*Deductor, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if m == nil {
		var err error
		if m, err = NewMetrics(nil); err != nil {
			return nil, err
		}
	}
	if opts.MaxRedo <= 0 {
		opts.MaxRedo = 8
	}
	var shards Shards = oneShard{}
	if opts.Shards != nil {
		shards = opts.Shards
	}
	return &Deductor{
		rdb: rdb, keys: keys, locks: locks, ledger: led, log: log, metrics: m, opts: opts, shards: shards,
		now: time.Now, deductLua: quota.Script("deduct", deductSrc), settleLua: quota.Script("settle", settleSrc),
		dropLua: quota.Script("drop", dropSrc),
	}, nil
}

// Steps of a batch, reported to afterStep.
const (
	stepLocked    = "locked"
	stepDeducted  = "deducted"
	stepCommitted = "committed"
	stepConfirmed = "confirmed"
)

// crashError is a simulated crash (see afterStep).
type crashError struct{ err error }

func (e *crashError) Error() string { return "deduct: simulated crash: " + e.err.Error() }
func (e *crashError) Unwrap() error { return e.err }

func (d *Deductor) step(name string) error {
	if d.afterStep == nil {
		return nil
	}
	if err := d.afterStep(name); err != nil {
		return &crashError{err: err}
	}
	return nil
}

// heldLock is one shard's lock in a batch: the key the scripts fence on and its token.
type heldLock struct{ key, token string }

// locked runs fn under the shards' locks (by tag: the merchant id of an
// unsharded merchant), taken in one Acquire, with a context that ends with
// cause ErrLockLost as soon as one of them is lost, then releases them (a
// simulated crash releases nothing).
func (d *Deductor) locked(ctx context.Context, tags []string, fn func(ctx context.Context, held map[string]heldLock) error) (err error) {
	tags = slices.Compact(slices.Sorted(slices.Values(tags)))
	lctx, span := tracing.Start(ctx, "deduct.lock")
	tracing.SetInt(span, "billing.merchants", len(tags))
	locks, err := d.locks.Acquire(lctx, tags)
	tracing.End(span, err)
	if err != nil {
		return fmt.Errorf("deduct: lock %d shard(s): %w", len(tags), err)
	}
	defer func() {
		var crash *crashError
		if !errors.As(err, &crash) {
			d.release(ctx, locks)
		}
	}()
	held := make(map[string]heldLock, len(tags))
	for i, key := range locks.Keys() {
		held[tags[i]] = heldLock{key: key, token: locks.Token()}
	}
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(locks.Context(), func() {
		cancel(fmt.Errorf("%w: %w", ErrLockLost, context.Cause(locks.Context())))
	})
	defer stop()
	return lockCause(fctx, fn(fctx, held))
}

// tagsOf lists the lock tags of every shard of the merchants, in both
// layouts while a resharding folds.
func (d *Deductor) tagsOf(ctx context.Context, merchants []string) ([]string, error) {
	layouts, err := d.shards.Layouts(ctx, merchants)
	if err != nil {
		return nil, err
	}
	var tags []string
	for _, m := range merchants {
		tags = append(tags, layouts[m].Tags(m)...)
	}
	return tags, nil
}

// lockCause makes err say ErrLockLost when ctx ended because a lock was lost.
func lockCause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); err != nil && errors.Is(cause, ErrLockLost) && !errors.Is(err, ErrLockLost) {
		return fmt.Errorf("%w (%w)", cause, err)
	}
	return err
}

// release unlocks, even when ctx has ended, within releaseTimeout. A lock that
// cannot be released expires by its TTL; the batch's effects stand.
func (d *Deductor) release(ctx context.Context, locks Held) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := locks.Release(rctx); err != nil {
		d.log.Warn("release merchant locks", zap.Strings("keys", locks.Keys()), zap.Error(err))
	}
}

// MerchantLocks is the Locker of the worker: a batch's shard locks, taken
// together by one lock.Client.Wait, whose Context ends when any of them is lost.
func MerchantLocks(client *lock.Client, keys keyspace.Keyspace, ttl time.Duration) Locker {
	return merchantLocks{client: client, keys: keys, ttl: ttl}
}

type merchantLocks struct {
	client *lock.Client
	keys   keyspace.Keyspace
	ttl    time.Duration
}

func (m merchantLocks) Acquire(ctx context.Context, tags []string) (Held, error) {
	keys := make([]string, len(tags))
	for i, tag := range tags {
		keys[i] = m.keys.Lock(tag)
	}
	l, err := m.client.Wait(ctx, keys, m.ttl)
	if err != nil {
		return nil, err // not l: a nil *lock.Lock is a non-nil Held
	}
	return l, nil
}
