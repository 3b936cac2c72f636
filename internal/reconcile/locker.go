package reconcile

import (
	"context"
	"errors"
	"time"

	"github.com/quotaflow/billing/internal/lock"
)

// ErrBusy means another holder (a worker) has the merchant lock.
var ErrBusy = errors.New("reconcile: merchant busy")

// Locker tries merchant locks once. NewLocker adapts *lock.Client.
type Locker interface {
	// TryLock takes key for ttl in a single try, or returns ErrBusy.
	TryLock(ctx context.Context, key string, ttl time.Duration) (Held, error)
}

// Held is one acquisition of a lock.
type Held interface {
	Token() string // the fencing token the repair scripts check
	Release(ctx context.Context) error
}

// NewLocker adapts a lock client.
func NewLocker(c *lock.Client) Locker { return lockClient{c} }

type lockClient struct{ c *lock.Client }

func (l lockClient) TryLock(ctx context.Context, key string, ttl time.Duration) (Held, error) {
	h, err := l.c.Obtain(ctx, key, ttl)
	if errors.Is(err, lock.ErrNotObtained) {
		return nil, ErrBusy
	}
	if err != nil {
		return nil, err
	}
	return h, nil
}
