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
// is internal/lock): SET NX PX with a random token, a polling wait, and a
// compare-and-delete release. It has no watchdog: tests end a lock's context
// by hand with lost().
type testLocker struct {
	rdb  redis.UniversalClient
	keys keyspace.Keyspace
	ttl  time.Duration

	mu   sync.Mutex
	last map[string]*testLock // the latest lock taken per merchant
}

var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

func newTestLocker(rdb redis.UniversalClient, keys keyspace.Keyspace, ttl time.Duration) *testLocker {
	return &testLocker{rdb: rdb, keys: keys, ttl: ttl, last: make(map[string]*testLock)}
}

func (l *testLocker) Acquire(ctx context.Context, merchantID string) (HeldLock, error) {
	key := l.keys.Lock(merchantID)
	var b [16]byte
	if _, err := crand.Read(b[:]); err != nil {
		return nil, err
	}
	token := hex.EncodeToString(b[:])
	for {
		ok, err := l.rdb.SetNX(ctx, key, token, l.ttl).Result()
		if err != nil {
			return nil, err
		}
		if ok {
			lctx, cancel := context.WithCancel(context.Background())
			lk := &testLock{rdb: l.rdb, key: key, token: token, ctx: lctx, cancel: cancel}
			l.mu.Lock()
			l.last[merchantID] = lk
			l.mu.Unlock()
			return lk, nil
		}
		t := time.NewTimer(time.Duration(500+rand.IntN(1500)) * time.Microsecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

func (l *testLocker) held(merchantID string) *testLock {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last[merchantID]
}

type testLock struct {
	rdb        redis.UniversalClient
	key, token string
	ctx        context.Context
	cancel     context.CancelFunc
}

func (l *testLock) Key() string              { return l.key }
func (l *testLock) Token() string            { return l.token }
func (l *testLock) Context() context.Context { return l.ctx }

// lost ends the lock's context, as a watchdog does when a renewal finds the lock gone.
func (l *testLock) lost() { l.cancel() }

func (l *testLock) Release(ctx context.Context) error {
	defer l.cancel()
	n, err := releaseScript.Run(ctx, l.rdb, []string{l.key}, l.token).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return errors.New("test lock: not held")
	}
	return nil
}
