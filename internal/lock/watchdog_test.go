package lock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/quotaflow/billing/internal/keyspace"
	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/testenv"
)

func TestWatchdogKeepsLock(t *testing.T) {
	r, c, reg := setup(t)
	ctx := context.Background()
	key := r.Keys.Lock("m-1")
	l, err := c.Obtain(ctx, key, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	wctx := l.Watch(ctx)
	time.Sleep(time.Second) // more than three TTLs
	if wctx.Err() != nil {
		t.Fatalf("watched context ended: %v", context.Cause(wctx))
	}
	if got := r.Client.Get(ctx, key).Val(); got != l.Token() {
		t.Fatalf("lock value = %q after 3 TTLs, want our token", got)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if wctx.Err() == nil || errors.Is(context.Cause(wctx), lock.ErrLost) {
		t.Fatalf("after Release: ctx err = %v, cause = %v; want cancelled, not lost", wctx.Err(), context.Cause(wctx))
	}
	if got := metric(t, reg, "billing_lock_lost_total", nil); got != 0 {
		t.Fatalf("lost = %v, want 0", got)
	}
	if w2 := l.Watch(ctx); w2.Err() == nil {
		t.Fatal("Watch after Release returned a live context")
	}
}

// Whatever takes the key away, the holder's context is cancelled at the next
// renewal: within TTL/3 plus a round trip, well before the TTL ran out.
func TestWatchdogDetectsLoss(t *testing.T) {
	const ttl = 900 * time.Millisecond
	tests := []struct {
		name  string
		steal func(t *testing.T, r *testenv.Redis, key string)
		other bool // the key now holds another holder's token
	}{
		{"key deleted", func(t *testing.T, r *testenv.Redis, key string) {
			r.Client.Del(context.Background(), key)
		}, false},
		{"all keys wiped", func(t *testing.T, r *testenv.Redis, key string) {
			if n := deletePrefix(t, r.Client, r.Keys.Prefix()); n == 0 {
				t.Fatal("nothing deleted")
			}
		}, false},
		{"taken by another holder", func(t *testing.T, r *testenv.Redis, key string) {
			r.Client.Set(context.Background(), key, "someone-else", time.Minute)
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, c, reg := setup(t)
			ctx := context.Background()
			key := r.Keys.Lock("m-1")
			l, err := c.Obtain(ctx, key, ttl)
			if err != nil {
				t.Fatal(err)
			}
			wctx := l.Watch(ctx)
			time.Sleep(ttl / 2) // at least one renewal done
			tt.steal(t, r, key)
			took := waitDone(t, wctx, ttl)
			requireLost(t, wctx, l, true)
			t.Logf("lost noticed after %v (TTL/3 = %v)", took, ttl/3)
			if took > ttl/3+300*time.Millisecond {
				t.Fatalf("loss noticed after %v, want within TTL/3 + a round trip", took)
			}
			if got := metric(t, reg, "billing_lock_lost_total", map[string]string{"reason": "not_held"}); got != 1 {
				t.Fatalf("lost{not_held} = %v, want 1", got)
			}
			if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("Release of a lost lock: err = %v, want ErrNotHeld", err)
			}
			if tt.other {
				if got := r.Client.Get(ctx, key).Val(); got != "someone-else" {
					t.Fatalf("other holder's value = %q: Release touched it", got)
				}
				if ttl := r.Client.PTTL(ctx, key).Val(); ttl < 50*time.Second {
					t.Fatalf("other holder's PTTL = %v: the watchdog touched it", ttl)
				}
			}
		})
	}
}

func TestWatchdogStopsWithContext(t *testing.T) {
	r, c, _ := setup(t)
	ctx := context.Background()
	key := r.Keys.Lock("m-1")
	const ttl = 300 * time.Millisecond
	l, err := c.Obtain(ctx, key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()
	pctx, cancel := context.WithCancel(ctx)
	wctx := l.Watch(pctx)
	cancel()
	waitDone(t, wctx, time.Second)
	goleak.VerifyNone(t, before) // the watchdog goroutine has exited
	time.Sleep(2 * ttl)
	if n := r.Client.Exists(ctx, key).Val(); n != 0 {
		t.Fatal("lock still renewed after its context was cancelled")
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release of an expired lock: err = %v, want ErrNotHeld", err)
	}
}

// failingHook makes the lock's scripts fail as if the connection broke.
type failingHook struct{ on atomic.Bool }

func (h *failingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *failingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *failingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.on.Load() && (cmd.Name() == "evalsha" || cmd.Name() == "eval") {
			err := errors.New("injected: connection reset by peer")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// Renewal errors shorter than the TTL are retried and the lock survives.
func TestWatchdogRetriesTransientErrors(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { rdb.Close() })
	hook := &failingHook{}
	rdb.AddHook(hook)
	c, reg := newClient(t, rdb, r.Keys, lock.Options{})
	ctx := context.Background()
	const ttl = 900 * time.Millisecond
	l, err := c.Obtain(ctx, r.Keys.Lock("m-1"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	hook.on.Store(true)
	wctx := l.Watch(ctx)
	time.Sleep(ttl / 2) // the first renewal (at TTL/3) and some retries fail
	hook.on.Store(false)
	time.Sleep(ttl)
	if wctx.Err() != nil {
		t.Fatalf("lock lost on transient errors: %v", context.Cause(wctx))
	}
	if got := metric(t, reg, "billing_lock_renew_errors_total", nil); got < 1 {
		t.Fatalf("renew errors = %v, want >= 1", got)
	}
	if left, err := l.TTL(ctx); err != nil || left < ttl/3 {
		t.Fatalf("TTL = %v, %v; want renewed", left, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// ownRedis starts a redis-server of the test's own and a Client on it.
func ownRedis(t *testing.T) (*testenv.RedisServer, *lock.Client, keyspace.Keyspace, *prometheus.Registry) {
	t.Helper()
	s := testenv.StartRedisServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { rdb.Close() })
	keys, err := keyspace.New("locktest:")
	if err != nil {
		t.Fatal(err)
	}
	c, reg := newClient(t, rdb, keys, lock.Options{})
	return s, c, keys, reg
}

// A restart without persistence loses the key: the holder notices at the next
// renewal after Redis is back.
func TestWatchdogDetectsRedisRestart(t *testing.T) {
	s, c, keys, reg := ownRedis(t)
	ctx := context.Background()
	const ttl = 1500 * time.Millisecond
	l, err := c.Obtain(ctx, keys.Lock("m-1"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	wctx := l.Watch(ctx)
	time.Sleep(ttl / 2)
	s.Kill()
	s.Start()
	took := waitDone(t, wctx, 2*ttl)
	t.Logf("lost noticed %v after the restart (TTL/3 = %v)", took, ttl/3)
	requireLost(t, wctx, l, true)
	if took > ttl/3+500*time.Millisecond {
		t.Fatalf("loss noticed %v after the restart, want within TTL/3 + a round trip", took)
	}
	if got := metric(t, reg, "billing_lock_lost_total", map[string]string{"reason": "not_held"}); got != 1 {
		t.Fatalf("lost{not_held} = %v, want 1", got)
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release after restart: err = %v, want ErrNotHeld", err)
	}
}

// Redis gone for longer than the TTL: renewals are retried until the lock
// would have expired, then the holder's context is cancelled.
func TestWatchdogGivesUpWhenRedisStaysDown(t *testing.T) {
	s, c, keys, reg := ownRedis(t)
	ctx := context.Background()
	const ttl = 900 * time.Millisecond
	l, err := c.Obtain(ctx, keys.Lock("m-1"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	wctx := l.Watch(ctx)
	time.Sleep(ttl / 2) // one renewal at TTL/3 succeeded
	s.Kill()
	took := waitDone(t, wctx, 3*ttl)
	requireLost(t, wctx, l, false)
	t.Logf("lost %v after the kill; cause: %v", took, context.Cause(wctx))
	// The last good renewal was sent before the kill, so the lock expires less
	// than a TTL after it; the holder must know by then (plus scheduling slack).
	if took > ttl+200*time.Millisecond {
		t.Fatalf("lost %v after the kill: later than the lock's expiry", took)
	}
	if got := metric(t, reg, "billing_lock_lost_total", map[string]string{"reason": "expired"}); got != 1 {
		t.Fatalf("lost{expired} = %v, want 1", got)
	}
	if got := metric(t, reg, "billing_lock_renew_errors_total", nil); got < 1 {
		t.Fatalf("renew errors = %v, want >= 1", got)
	}
	if err := l.Release(ctx); err == nil || errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release with Redis down: err = %v, want a Redis error", err)
	}
}

// 10k obtain/watch/release cycles, half of them through Wait under
// contention, leave no goroutine behind once the Client is closed.
func TestNoGoroutineLeak(t *testing.T) {
	before := goleak.IgnoreCurrent()
	r := testenv.NewRedis(t)
	c, err := lock.New(r.Client, r.Keys, lock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const cycles = 10000
	key := r.Keys.Lock("m-1")
	errc := make(chan error, 2)
	for range 2 {
		go func() {
			for range cycles / 2 {
				l, err := c.Wait(ctx, key, 10*time.Second)
				if err != nil {
					errc <- err
					return
				}
				l.Watch(ctx)
				if err := l.Release(ctx); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, before)
}
