package app

import (
	"context"
	"errors"
	"time"

	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/idgen"
	"github.com/quotaflow/billing/internal/keyspace"
	"github.com/quotaflow/billing/internal/lock"
)

// MerchantLocks adapts a lock client to the write path: the merchant locks,
// with a watchdog whose context ends when a lock is lost. The bench's pipeline
// strategy uses it too, so it measures the production locking.
func MerchantLocks(client *lock.Client, keys keyspace.Keyspace, ttl time.Duration) deduct.BatchLocker {
	return merchantLocks{client: client, keys: keys, ttl: ttl}
}

type merchantLocks struct {
	client *lock.Client
	keys   keyspace.Keyspace
	ttl    time.Duration
}

func (m merchantLocks) Acquire(ctx context.Context, merchantID string) (deduct.HeldLock, error) {
	l, err := m.client.Wait(ctx, m.keys.Lock(merchantID), m.ttl)
	if err != nil {
		return nil, err
	}
	return &heldLock{Lock: l, ctx: l.Watch(ctx)}, nil
}

// AcquireAll takes the merchants' locks in their order, one round trip when
// none is contended (lock.Client.WaitMany), with one watchdog for all of them
// (lock.Client.WatchMany): each lock's Context ends when any of them is lost
// or released, which is what a batch needs.
func (m merchantLocks) AcquireAll(ctx context.Context, merchantIDs []string) ([]deduct.HeldLock, error) {
	keys := make([]string, len(merchantIDs))
	for i, id := range merchantIDs {
		keys[i] = m.keys.Lock(id)
	}
	locks, err := m.client.WaitMany(ctx, keys, m.ttl)
	if err != nil {
		return nil, err
	}
	wctx := m.client.WatchMany(ctx, locks)
	held := make([]deduct.HeldLock, len(locks))
	for i, l := range locks {
		held[i] = &heldLock{Lock: l, ctx: wctx}
	}
	return held, nil
}

// ReleaseAll releases the locks in one round trip (lock.Client.ReleaseMany).
func (m merchantLocks) ReleaseAll(ctx context.Context, held []deduct.HeldLock) error {
	locks := make([]*lock.Lock, 0, len(held))
	var errs []error
	for _, h := range held {
		if hl, ok := h.(*heldLock); ok {
			locks = append(locks, hl.Lock)
		} else {
			errs = append(errs, h.Release(ctx))
		}
	}
	return errors.Join(append(errs, m.client.ReleaseMany(ctx, locks))...)
}

type heldLock struct {
	*lock.Lock
	ctx context.Context
}

func (h *heldLock) Context() context.Context { return h.ctx }

// ledgerIDs adapts the Snowflake generator to the ledger's bulk ID source.
type ledgerIDs struct {
	gen *idgen.Generator
}

// NextIDs fills dst. Its refusals are outages by idgen's own errors (Outage() true).
func (l ledgerIDs) NextIDs(dst []int64) error {
	ids := make([]idgen.ID, len(dst))
	if err := l.gen.NextIDs(ids); err != nil {
		return err
	}
	for i, id := range ids {
		dst[i] = int64(id)
	}
	return nil
}
