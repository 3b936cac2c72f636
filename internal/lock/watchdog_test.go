package lock_test

import (
	"context"
	"errors"
	"strings"
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
	before := goleak.IgnoreCurrent()
	l, err := c.Wait(ctx, lockKeys(r, "m-1", "m-2", "m-3"), 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // more than three TTLs
	if l.Context().Err() != nil {
		t.Fatalf("lock context ended: %v", context.Cause(l.Context()))
	}
	for _, k := range l.Keys() {
		if got := r.Client.Get(ctx, k).Val(); got != l.Token() {
			t.Fatalf("%s = %q after 3 TTLs, want our token", k, got)
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, before) // Release waited for the watchdog
	if got := metric(t, reg, "billing_lock_lost_total", nil); got != 0 {
		t.Fatalf("lost = %v, want 0", got)
	}
}

// Whatever takes a key away, the Lock's context is cancelled at the next
// renewal, naming the key: within TTL/3 plus a round trip, well before the
// TTL ran out. Nothing of the other holder's is touched; the other keys are
// released.
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
			keys := lockKeys(r, "m-1", "m-2", "m-3")
			l, err := c.Wait(ctx, keys, ttl)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(ttl / 2) // at least one renewal done
			tt.steal(t, r, keys[1])
			took := waitDone(t, l.Context(), ttl)
			requireLost(t, l, true)
			t.Logf("lost noticed after %v (TTL/3 = %v): %v", took, ttl/3, context.Cause(l.Context()))
			if took > ttl/3+300*time.Millisecond {
				t.Fatalf("loss noticed after %v, want within TTL/3 + a round trip", took)
			}
			named := keys[1]
			if tt.name == "all keys wiped" {
				named = keys[0] // the first key found gone
			}
			if cause := context.Cause(l.Context()).Error(); !strings.Contains(cause, named) {
				t.Fatalf("cause %q does not name %s", cause, named)
			}
			if got := metric(t, reg, "billing_lock_lost_total", map[string]string{"reason": "not_held"}); got != 1 {
				t.Fatalf("lost{not_held} = %v, want 1", got)
			}
			if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("Release of a lost lock: err = %v, want ErrNotHeld", err)
			}
			for _, k := range []string{keys[0], keys[2]} {
				if r.Client.Exists(ctx, k).Val() != 0 {
					t.Fatalf("%s still held after Release", k)
				}
			}
			if tt.other {
				if got := r.Client.Get(ctx, keys[1]).Val(); got != "someone-else" {
					t.Fatalf("other holder's value = %q: Release touched it", got)
				}
				if ttl := r.Client.PTTL(ctx, keys[1]).Val(); ttl < 50*time.Second {
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
	before := goleak.IgnoreCurrent()
	pctx, cancel := context.WithCancel(ctx)
	l, err := c.Obtain(pctx, key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	waitDone(t, l.Context(), time.Second)
	if errors.Is(context.Cause(l.Context()), lock.ErrLost) {
		t.Fatalf("cause = %v, want the caller's cancel, not a loss", context.Cause(l.Context()))
	}
	time.Sleep(2 * ttl)
	goleak.VerifyNone(t, before) // the watchdog goroutine has exited
	if n := r.Client.Exists(ctx, key).Val(); n != 0 {
		t.Fatal("lock still renewed after its context was cancelled")
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release of an expired lock: err = %v, want ErrNotHeld", err)
	}
}

// failingScripts makes scripts fail as if the connection broke, whether sent
// alone (a single Redis) or pipelined (a Cluster).
type failingScripts struct{ on atomic.Bool }

func (h *failingScripts) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *failingScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.on.Load() && (cmd.Name() == "evalsha" || cmd.Name() == "eval") {
			err := errors.New("injected: connection reset by peer")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}
func (h *failingScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.on.Load() {
			err := errors.New("injected: connection reset by peer")
			for _, cmd := range cmds {
				cmd.SetErr(err)
			}
			return err
		}
		return next(ctx, cmds)
	}
}

// Renewal errors shorter than the TTL are retried and the lock survives.
func TestWatchdogRetriesTransientErrors(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { rdb.Close() })
	hook := &failingScripts{}
	rdb.AddHook(hook)
	c, reg := newClient(t, rdb, lock.Options{})
	ctx := context.Background()
	const ttl = 900 * time.Millisecond
	l, err := c.Wait(ctx, lockKeys(r, "m-1", "m-2"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	hook.on.Store(true)
	time.Sleep(ttl / 2) // the first renewal (at TTL/3) and some retries fail
	hook.on.Store(false)
	time.Sleep(ttl)
	if l.Context().Err() != nil {
		t.Fatalf("lock lost on transient errors: %v", context.Cause(l.Context()))
	}
	if got := metric(t, reg, "billing_lock_renew_errors_total", nil); got < 1 {
		t.Fatalf("renew errors = %v, want >= 1", got)
	}
	for _, k := range l.Keys() {
		if left := r.Client.PTTL(ctx, k).Val(); left < ttl/3 {
			t.Fatalf("%s PTTL = %v; want renewed", k, left)
		}
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
	c, reg := newClient(t, rdb, lock.Options{})
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
	time.Sleep(ttl / 2)
	s.Kill()
	s.Start()
	took := waitDone(t, l.Context(), 2*ttl)
	t.Logf("lost noticed %v after the restart (TTL/3 = %v)", took, ttl/3)
	requireLost(t, l, true)
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

// Redis gone for longer than the TTL: renewals are retried until the keys
// would have expired, then the holder's context is cancelled.
func TestWatchdogGivesUpWhenRedisStaysDown(t *testing.T) {
	s, c, keys, reg := ownRedis(t)
	ctx := context.Background()
	const ttl = 900 * time.Millisecond
	l, err := c.Wait(ctx, []string{keys.Lock("m-1"), keys.Lock("m-2")}, ttl)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl / 2) // one renewal at TTL/3 succeeded
	s.Kill()
	took := waitDone(t, l.Context(), 3*ttl)
	requireLost(t, l, false)
	t.Logf("lost %v after the kill; cause: %v", took, context.Cause(l.Context()))
	// The last good renewal was sent before the kill, so the keys expire less
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

// 10k obtain/release cycles, contended, through Wait and Obtain, leave no
// goroutine behind.
func TestNoGoroutineLeak(t *testing.T) {
	before := goleak.IgnoreCurrent()
	r := testenv.NewRedis(t)
	c, err := lock.New(r.Client, lock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const cycles = 10000
	keys := lockKeys(r, "m-1", "m-2")
	errc := make(chan error, 2)
	for g := range 2 {
		go func() {
			for i := range cycles / 2 {
				var l *lock.Lock
				var err error
				if g == 0 && i%2 == 0 {
					l, err = c.Obtain(ctx, keys[0], 10*time.Second)
				} else {
					l, err = c.Wait(ctx, keys, 10*time.Second)
				}
				if errors.Is(err, lock.ErrNotObtained) {
					continue
				}
				if err == nil {
					err = l.Release(ctx)
				}
				if err != nil {
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
