package deduct

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/keyspace"
	"github.com/quotaflow/billing/internal/lock"
)

// testLocker is the production Locker (MerchantLocks on internal/lock) that
// remembers the lock it last handed out per merchant, so a test can name it
// and end its context by hand (lost), as the watchdog does when a renewal
// finds a key gone.
type testLocker struct {
	Locker
	mu   sync.Mutex
	last map[string]merchantLock
	all  []*testLock
}

func newTestLocker(t testing.TB, rdb lock.Redis, keys keyspace.Keyspace, ttl time.Duration) *testLocker {
	t.Helper()
	c, err := lock.New(rdb, lock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := &testLocker{Locker: MerchantLocks(c, keys, ttl), last: map[string]merchantLock{}}
	// A simulated crash releases nothing, but its watchdog must not outlive the test.
	t.Cleanup(func() {
		for _, lk := range l.all {
			_ = lk.Held.Release(context.Background())
		}
		_ = c.Close()
	})
	return l
}

func (l *testLocker) Acquire(ctx context.Context, tags []string) (Held, error) {
	held, err := l.Locker.Acquire(ctx, tags)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(held.Context())
	lk := &testLock{Held: held, ctx: lctx, cancel: cancel}
	l.mu.Lock()
	l.all = append(l.all, lk)
	for i, key := range held.Keys() {
		l.last[tags[i]] = merchantLock{lk, key}
	}
	l.mu.Unlock()
	return lk, nil
}

func (l *testLocker) held(merchantID string) merchantLock {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last[merchantID]
}

type testLock struct {
	Held
	ctx    context.Context
	cancel context.CancelFunc
}

func (l *testLock) Context() context.Context { return l.ctx }

// lost ends the lock's context.
func (l *testLock) lost() { l.cancel() }

func (l *testLock) Release(ctx context.Context) error {
	defer l.cancel()
	return l.Held.Release(ctx)
}

// merchantLock is one merchant's key of a testLock.
type merchantLock struct {
	*testLock
	key string
}

func (m merchantLock) Key() string { return m.key }
