package writepath

import (
	"context"
	"time"

	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/keyspace"
	"github.com/quotaflow/billing/internal/lock"
)

// MerchantLocks adapts a lock client to the write path: a batch's merchant
// locks, taken together by one lock.Client.Wait, whose Context ends when any
// of them is lost. The bench's pipeline strategy uses it too, so it measures
// the production locking.
func MerchantLocks(client *lock.Client, keys keyspace.Keyspace, ttl time.Duration) deduct.Locker {
	return merchantLocks{client: client, keys: keys, ttl: ttl}
}

type merchantLocks struct {
	client *lock.Client
	keys   keyspace.Keyspace
	ttl    time.Duration
}

func (m merchantLocks) Acquire(ctx context.Context, merchantIDs []string) (deduct.Held, error) {
	keys := make([]string, len(merchantIDs))
	for i, id := range merchantIDs {
		keys[i] = m.keys.Lock(id)
	}
	l, err := m.client.Wait(ctx, keys, m.ttl)
	if err != nil {
		return nil, err // not l: a nil *lock.Lock is a non-nil Held
	}
	return l, nil
}
