package deduct

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotaflow/billing/internal/keyspace"
)

// testLocker is a minimal real Redis lock for these tests (the production one
// is internal/lock): SET NX PX of each key in turn with one random token, a
// polling wait, and a compare-and-delete release. It has no watchdog: tests
// end a lock's context by hand with lost().
type testLocker struct {
	rdb  redis.UniversalClient
	keys keyspace.Keyspace
	ttl  time.Duration

	mu   sync.Mutex
	last map[string]merchantLock // the latest lock taken per merchant
}

var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

func newTestLocker(rdb redis.UniversalClient, keys keyspace.Keyspace, ttl time.Duration) *testLocker {
	return &testLocker{rdb: rdb, keys: keys, ttl: ttl, last: make(map[string]merchantLock)}
}

func (l *testLocker) Acquire(ctx context.Context, merchantIDs []string) (Held, error) {
	var b [16]byte
	if _, err := crand.Read(b[:]); err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	lk := &testLock{rdb: l.rdb, token: hex.EncodeToString(b[:]), ctx: lctx, cancel: cancel}
	for _, m := range merchantIDs {
		if err := l.take(ctx, l.keys.Lock(m), lk.token); err != nil {
			_ = lk.Release(context.WithoutCancel(ctx))
			return nil, err
		}
		lk.keys = append(lk.keys, l.keys.Lock(m))
	}
	l.mu.Lock()
	for i, m := range merchantIDs {
		l.last[m] = merchantLock{lk, lk.keys[i]}
	}
	l.mu.Unlock()
	return lk, nil
}

func (l *testLocker) take(ctx context.Context, key, token string) error {
	for {
		ok, err := l.rdb.SetNX(ctx, key, token, l.ttl).Result()
		if err != nil || ok {
			return err
		}
		t := time.NewTimer(time.Duration(500+rand.IntN(1500)) * time.Microsecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (l *testLocker) held(merchantID string) merchantLock {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last[merchantID]
}

type testLock struct {
	rdb    redis.UniversalClient
	keys   []string
	token  string
	ctx    context.Context
	cancel context.CancelFunc
}

func (l *testLock) Keys() []string           { return l.keys }
func (l *testLock) Token() string            { return l.token }
func (l *testLock) Context() context.Context { return l.ctx }

// lost ends the lock's context, as a watchdog does when a renewal finds a key gone.
func (l *testLock) lost() { l.cancel() }

func (l *testLock) Release(ctx context.Context) error {
	defer l.cancel()
	var errs []error
	for _, key := range l.keys {
		n, err := releaseScript.Run(ctx, l.rdb, []string{key}, l.token).Int()
		if err == nil && n == 0 {
			err = errors.New("test lock: not held: " + key)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// merchantLock is one merchant's key of a testLock.
type merchantLock struct {
	*testLock
	key string
}

func (m merchantLock) Key() string { return m.key }
