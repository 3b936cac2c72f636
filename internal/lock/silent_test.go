package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/dial"
	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/testenv"
)

// silentRedis returns a production client (dial.Redis) that reaches the
// test's Redis through a proxy the test can pause.
func silentRedis(t *testing.T, r *testenv.Redis) (*testenv.Proxy, redis.UniversalClient) {
	t.Helper()
	p := testenv.NewProxy(t, r.Addr)
	rdb, err := dial.Redis(config.Redis{Addrs: []string{p.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return p, rdb
}

// Redis stops answering without closing the connection (a partition, a frozen
// proxy): the holder's context is cancelled before another holder, on a
// Redis it still reaches, obtains the lock.
func TestWatchdogSilentRedis(t *testing.T) {
	// The holder's only head start is the drift allowance (1% + 2ms: 12ms
	// here), which is also all a loaded machine has for scheduling it.
	const ttl = time.Second
	tests := []struct {
		name  string
		watch func(c *lock.Client, locks []*lock.Lock) context.Context
	}{
		{"Watch", func(_ *lock.Client, locks []*lock.Lock) context.Context {
			return locks[0].Watch(context.Background())
		}},
		{"WatchMany", func(c *lock.Client, locks []*lock.Lock) context.Context {
			return c.WatchMany(context.Background(), locks)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := testenv.NewRedis(t)
			proxy, rdb := silentRedis(t, r)
			a, reg := newClient(t, rdb, r.Keys, lock.Options{})
			b, _ := newClient(t, r.Client, r.Keys, lock.Options{})
			ctx := context.Background()
			keys := lockKeys(r, "m-1", "m-2")
			held, err := a.ObtainMany(ctx, keys, ttl)
			if err != nil || held[0] == nil || held[1] == nil {
				t.Fatalf("ObtainMany = %v, %v", held, err)
			}
			wctx := tt.watch(a, held)
			lostAt := make(chan time.Time, 1)
			context.AfterFunc(wctx, func() { lostAt <- time.Now() })
			time.Sleep(ttl / 2) // a renewal at TTL/3 went through

			proxy.Pause()
			paused := time.Now()
			var got *lock.Lock
			for got == nil {
				l, err := b.Obtain(ctx, keys[0], time.Minute)
				switch {
				case err == nil:
					got = l
				case !errors.Is(err, lock.ErrNotObtained):
					t.Fatal(err)
				case time.Since(paused) > 10*ttl:
					t.Fatal("the silent holder's lock never expired")
				default:
					time.Sleep(time.Millisecond)
				}
			}
			obtained := time.Now()
			// The protocol's claim: the holder knew before anyone else could
			// take the lock.
			if wctx.Err() == nil {
				t.Fatalf("B obtained the lock %v after the pause while A's context was live", obtained.Sub(paused))
			}
			requireLost(t, wctx, held[0], false)
			lost := <-lostAt
			t.Logf("A lost %v after the pause, B obtained %v after it", lost.Sub(paused), obtained.Sub(paused))
			// The last renewal was sent before the pause, so the lock expired
			// at most a TTL after the pause (slack for scheduling only).
			if took := lost.Sub(paused); took > ttl+100*time.Millisecond {
				t.Fatalf("A counted the lock lost %v after the pause, later than its TTL %v", took, ttl)
			}
			if n := metric(t, reg, "billing_lock_lost_total", map[string]string{"reason": "expired"}); n < 1 {
				t.Fatalf("lost{expired} = %v, want >= 1", n)
			}
			proxy.Resume()
			if err := a.ReleaseMany(ctx, held); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("A's ReleaseMany after B took a lock = %v, want ErrNotHeld", err)
			}
			if err := got.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A second Watch of a lock keeps it renewed after the first watcher's context
// ends; a loss then cancels every live watcher.
func TestWatchTwice(t *testing.T) {
	r, c, _ := setup(t)
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	key := r.Keys.Lock("m-1")
	l, err := c.Obtain(ctx, key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	first, cancel := context.WithCancel(ctx)
	w1 := l.Watch(first)
	w2 := l.Watch(ctx)
	w3 := l.Watch(ctx)
	cancel()
	waitDone(t, w1, time.Second)
	time.Sleep(3 * ttl)
	for _, w := range []context.Context{w2, w3} {
		if w.Err() != nil {
			t.Fatalf("a live watcher ended with the first one: %v", context.Cause(w))
		}
	}
	if got := r.Client.Get(ctx, key).Val(); got != l.Token() {
		t.Fatalf("lock value = %q 3 TTLs after the first watcher ended, want our token", got)
	}
	r.Client.Del(ctx, key)
	for _, w := range []context.Context{w2, w3} {
		waitDone(t, w, ttl)
		requireLost(t, w, l, true)
	}
	if errors.Is(context.Cause(w1), lock.ErrLost) {
		t.Fatalf("the ended watcher's cause changed to %v", context.Cause(w1))
	}
}

// A lock watched alone and in a group stays renewed when the group's context
// ends; the group's other lock, watched by nobody else, expires.
func TestWatchAfterWatchMany(t *testing.T) {
	r, c, _ := setup(t)
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	locks, err := c.WaitMany(ctx, lockKeys(r, "m-1", "m-2"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	group, cancel := context.WithCancel(ctx)
	wg := c.WatchMany(group, locks)
	w0 := locks[0].Watch(ctx)
	cancel()
	waitDone(t, wg, time.Second)
	time.Sleep(3 * ttl)
	if w0.Err() != nil {
		t.Fatalf("the lock's own watcher ended with the group: %v", context.Cause(w0))
	}
	if got := r.Client.Get(ctx, locks[0].Key()).Val(); got != locks[0].Token() {
		t.Fatalf("%s = %q 3 TTLs after the group ended, want our token", locks[0].Key(), got)
	}
	if n := r.Client.Exists(ctx, locks[1].Key()).Val(); n != 0 {
		t.Fatalf("%s still renewed with no watcher", locks[1].Key())
	}
	r.Client.Del(ctx, locks[0].Key())
	waitDone(t, w0, ttl)
	requireLost(t, w0, locks[0], true)
}

// An obtain whose reply comes after the lock would have expired fails: the
// caller never gets a lock that may already be someone else's.
func TestObtainSilentRedis(t *testing.T) {
	const ttl = 300 * time.Millisecond
	tests := []struct {
		name   string
		obtain func(c *lock.Client, keys []string) error
	}{
		{"Obtain", func(c *lock.Client, keys []string) error {
			_, err := c.Obtain(context.Background(), keys[0], ttl)
			return err
		}},
		{"ObtainMany", func(c *lock.Client, keys []string) error {
			_, err := c.ObtainMany(context.Background(), keys, ttl)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := testenv.NewRedis(t)
			proxy, rdb := silentRedis(t, r)
			c, _ := newClient(t, rdb, r.Keys, lock.Options{})
			if err := rdb.Ping(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			proxy.Pause()
			errc := make(chan error, 1)
			go func() { errc <- tt.obtain(c, lockKeys(r, "m-1", "m-2")) }()
			time.Sleep(ttl + 100*time.Millisecond)
			proxy.Resume() // the reply comes now, too late
			if err := <-errc; err == nil || errors.Is(err, lock.ErrNotObtained) {
				t.Fatalf("obtain through a silent Redis = %v, want an error", err)
			}
		})
	}
}
