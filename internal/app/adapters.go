package app

import (
	"context"
	"time"

	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/idgen"
	"github.com/quotaflow/billing/internal/keyspace"
	"github.com/quotaflow/billing/internal/lock"
)

// merchantLocks adapts the lock client to the write path: the merchant lock,
// with a watchdog whose context ends when the lock is lost.
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

type heldLock struct {
	*lock.Lock
	ctx context.Context
}

func (h *heldLock) Context() context.Context { return h.ctx }

// ledgerIDs adapts the Snowflake generator to the ledger's bulk ID source.
type ledgerIDs struct {
	gen *idgen.Generator
}

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
