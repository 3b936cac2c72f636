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
	r := testenv.NewRedis(t)
	proxy, rdb := silentRedis(t, r)
	a, reg := newClient(t, rdb, lock.Options{})
	b, _ := newClient(t, r.Client, lock.Options{})
	ctx := context.Background()
	keys := lockKeys(r, "m-1", "m-2")
	held, err := a.Wait(ctx, keys, ttl)
	if err != nil {
		t.Fatal(err)
	}
	lostAt := make(chan time.Time, 1)
	context.AfterFunc(held.Context(), func() { lostAt <- time.Now() })
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
	// The protocol's claim: the holder knew before anyone else could take
	// the lock.
	if held.Context().Err() == nil {
		t.Fatalf("B obtained the lock %v after the pause while A's context was live", obtained.Sub(paused))
	}
	requireLost(t, held, false)
	lost := <-lostAt
	t.Logf("A lost %v after the pause, B obtained %v after it", lost.Sub(paused), obtained.Sub(paused))
	// The last renewal was sent before the pause, so the lock expired at most
	// a TTL after the pause (slack for scheduling only).
	if took := lost.Sub(paused); took > ttl+100*time.Millisecond {
		t.Fatalf("A counted the lock lost %v after the pause, later than its TTL %v", took, ttl)
	}
	if n := metric(t, reg, "billing_lock_lost_total", map[string]string{"reason": "expired"}); n != 1 {
		t.Fatalf("lost{expired} = %v, want 1", n)
	}
	proxy.Resume()
	if err := held.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("A's Release after B took a key = %v, want ErrNotHeld", err)
	}
	if err := got.Release(ctx); err != nil {
		t.Fatal(err)
	}
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
		{"Wait", func(c *lock.Client, keys []string) error {
			_, err := c.Wait(context.Background(), keys, ttl)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := testenv.NewRedis(t)
			proxy, rdb := silentRedis(t, r)
			c, _ := newClient(t, rdb, lock.Options{})
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
