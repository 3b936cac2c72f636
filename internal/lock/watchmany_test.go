package lock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/testenv"
)

func TestWatchManyKeepsLocks(t *testing.T) {
	r, c, reg := setup(t)
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	locks, err := c.WaitMany(ctx, lockKeys(r, "m-1", "m-2", "m-3"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()
	wctx := c.WatchMany(ctx, locks)
	time.Sleep(time.Second) // more than three TTLs
	if wctx.Err() != nil {
		t.Fatalf("watched context ended: %v", context.Cause(wctx))
	}
	for _, l := range locks {
		if got := r.Client.Get(ctx, l.Key()).Val(); got != l.Token() {
			t.Fatalf("%s = %q after 3 TTLs, want our token", l.Key(), got)
		}
	}
	if err := c.ReleaseMany(ctx, locks); err != nil {
		t.Fatal(err)
	}
	if wctx.Err() == nil || errors.Is(context.Cause(wctx), lock.ErrLost) {
		t.Fatalf("after ReleaseMany: ctx err = %v, cause = %v; want cancelled, not lost", wctx.Err(), context.Cause(wctx))
	}
	goleak.VerifyNone(t, before) // the one watchdog has exited
	if got := metric(t, reg, "billing_lock_lost_total", nil); got != 0 {
		t.Fatalf("lost = %v, want 0", got)
	}
}

// Whatever takes one key away, the batch's context is cancelled at the next
// renewal, naming that key; the other locks are untouched and releasable.
func TestWatchManyDetectsLoss(t *testing.T) {
	const ttl = 900 * time.Millisecond
	tests := []struct {
		name  string
		steal func(r *testenv.Redis, key string)
	}{
		{"key deleted", func(r *testenv.Redis, key string) { r.Client.Del(context.Background(), key) }},
		{"taken by another holder", func(r *testenv.Redis, key string) {
			r.Client.Set(context.Background(), key, "someone-else", time.Minute)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, c, reg := setup(t)
			ctx := context.Background()
			locks, err := c.WaitMany(ctx, lockKeys(r, "m-1", "m-2", "m-3"), ttl)
			if err != nil {
				t.Fatal(err)
			}
			wctx := c.WatchMany(ctx, locks)
			time.Sleep(ttl / 2) // at least one renewal done
			tt.steal(r, locks[1].Key())
			took := waitDone(t, wctx, ttl)
			requireLost(t, wctx, locks[1], true)
			if !strings.Contains(context.Cause(wctx).Error(), locks[1].Key()) {
				t.Fatalf("cause %v does not name %s", context.Cause(wctx), locks[1].Key())
			}
			t.Logf("lost noticed after %v (TTL/3 = %v)", took, ttl/3)
			if took > ttl/3+300*time.Millisecond {
				t.Fatalf("loss noticed after %v, want within TTL/3 + a round trip", took)
			}
			for _, l := range []*lock.Lock{locks[0], locks[2]} {
				select {
				case <-l.Lost():
					t.Fatalf("%s reported lost", l.Key())
				default:
				}
			}
			if got := metric(t, reg, "billing_lock_lost_total", map[string]string{"reason": "not_held"}); got != 1 {
				t.Fatalf("lost{not_held} = %v, want 1", got)
			}
			if err := c.ReleaseMany(ctx, locks); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("ReleaseMany = %v, want ErrNotHeld for the lost lock", err)
			}
			for _, l := range []*lock.Lock{locks[0], locks[2]} {
				if r.Client.Exists(ctx, l.Key()).Val() != 0 {
					t.Fatalf("%s still held after ReleaseMany", l.Key())
				}
			}
		})
	}
}

// Releasing one lock of the group ends the group's context and its watchdog.
func TestWatchManyEndsOnRelease(t *testing.T) {
	r, c, _ := setup(t)
	ctx := context.Background()
	locks, err := c.WaitMany(ctx, lockKeys(r, "m-1", "m-2"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()
	wctx := c.WatchMany(ctx, locks)
	if err := locks[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitDone(t, wctx, time.Second)
	if errors.Is(context.Cause(wctx), lock.ErrLost) {
		t.Fatalf("cause = %v, want a release, not a loss", context.Cause(wctx))
	}
	goleak.VerifyNone(t, before)
	if w := c.WatchMany(ctx, locks); w.Err() == nil {
		t.Fatal("WatchMany with a released lock returned a live context")
	}
	if w := c.WatchMany(ctx, nil); w.Err() == nil {
		t.Fatal("WatchMany of nothing returned a live context")
	}
	if err := c.ReleaseMany(ctx, locks[1:]); err != nil {
		t.Fatal(err)
	}
}

// failingScripts makes scripts fail as if the connection broke, whether sent
// alone (the many-key scripts of a single Redis) or pipelined (a Cluster).
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

// Renewal errors shorter than the TTL are retried and the locks survive.
func TestWatchManyRetriesTransientErrors(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { rdb.Close() })
	c, reg := newClient(t, rdb, r.Keys, lock.Options{})
	hook := &failingScripts{}
	rdb.AddHook(hook)
	ctx := context.Background()
	const ttl = 900 * time.Millisecond
	locks, err := c.WaitMany(ctx, lockKeys(r, "m-1", "m-2"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	hook.on.Store(true)
	wctx := c.WatchMany(ctx, locks)
	time.Sleep(ttl / 2) // the first renewal (at TTL/3) and some retries fail
	hook.on.Store(false)
	time.Sleep(ttl)
	if wctx.Err() != nil {
		t.Fatalf("locks lost on transient errors: %v", context.Cause(wctx))
	}
	if got := metric(t, reg, "billing_lock_renew_errors_total", nil); got < 1 {
		t.Fatalf("renew errors = %v, want >= 1", got)
	}
	for _, l := range locks {
		if left, err := l.TTL(ctx); err != nil || left < ttl/3 {
			t.Fatalf("%s TTL = %v, %v; want renewed", l.Key(), left, err)
		}
	}
	if err := c.ReleaseMany(ctx, locks); err != nil {
		t.Fatal(err)
	}
}

// Redis gone for longer than the TTL: renewals are retried until the locks
// would have expired, then the batch's context is cancelled.
func TestWatchManyGivesUpWhenRedisStaysDown(t *testing.T) {
	s, c, keys, reg := ownRedis(t)
	ctx := context.Background()
	const ttl = 900 * time.Millisecond
	locks, err := c.WaitMany(ctx, []string{keys.Lock("m-1"), keys.Lock("m-2")}, ttl)
	if err != nil {
		t.Fatal(err)
	}
	wctx := c.WatchMany(ctx, locks)
	time.Sleep(ttl / 2) // one renewal at TTL/3 succeeded
	s.Kill()
	took := waitDone(t, wctx, 3*ttl)
	if cause := context.Cause(wctx); !errors.Is(cause, lock.ErrLost) || errors.Is(cause, lock.ErrNotHeld) {
		t.Fatalf("cause = %v, want ErrLost (expired)", cause)
	}
	t.Logf("lost %v after the kill; cause: %v", took, context.Cause(wctx))
	if took > ttl+200*time.Millisecond {
		t.Fatalf("lost %v after the kill: later than the locks' expiry", took)
	}
	// The batch's context ends at the first loss; the other lock is marked
	// lost a moment later by the same watchdog (each is counted before its
	// Lost channel closes).
	for _, l := range locks {
		select {
		case <-l.Lost():
		case <-time.After(time.Second):
			t.Fatalf("%s: Lost() not closed", l.Key())
		}
	}
	if got := metric(t, reg, "billing_lock_lost_total", map[string]string{"reason": "expired"}); got != 2 {
		t.Fatalf("lost{expired} = %v, want 2", got)
	}
}
