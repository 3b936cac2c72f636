package deduct

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/keyspace"
	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/tracing"
)

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
