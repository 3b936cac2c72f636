package lock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotaflow/billing/internal/lock"
)

func TestObtainRelease(t *testing.T) {
	r, c, reg := setup(t)
	ctx := context.Background()
	key := r.Keys.Lock("m-1")

	l, err := c.Obtain(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.Keys(), []string{key}) || l.Token() == "" {
		t.Fatalf("Keys() = %q, Token() = %q", l.Keys(), l.Token())
	}
	if got := r.Client.Get(ctx, key).Val(); got != l.Token() {
		t.Fatalf("lock value = %q, want the token %q", got, l.Token())
	}
	if ttl := r.Client.PTTL(ctx, key).Val(); ttl <= 59*time.Second || ttl > time.Minute {
		t.Fatalf("PTTL = %v; want about 1m", ttl)
	}
	if _, err := c.Obtain(ctx, key, time.Minute); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("second Obtain: err = %v, want ErrNotObtained", err)
	}

	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := r.Client.Exists(ctx, key).Val(); n != 0 {
		t.Fatal("key still exists after Release")
	}
	if l.Context().Err() == nil || errors.Is(context.Cause(l.Context()), lock.ErrLost) {
		t.Fatalf("after Release: context %v, cause %v; want ended, not lost", l.Context().Err(), context.Cause(l.Context()))
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("second Release: err = %v, want ErrNotHeld", err)
	}

	l2, err := c.Obtain(ctx, key, time.Minute)
	if err != nil {
		t.Fatalf("Obtain after Release: %v", err)
	}
	if l2.Token() == l.Token() {
		t.Fatal("two acquisitions got the same token")
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := metric(t, reg, "billing_lock_obtain_total", map[string]string{"mode": "try", "result": "obtained"}); got != 2 {
		t.Fatalf("obtained = %v, want 2", got)
	}
	if got := metric(t, reg, "billing_lock_obtain_total", map[string]string{"mode": "try", "result": "not_obtained"}); got != 1 {
		t.Fatalf("not_obtained = %v, want 1", got)
	}
	if got := metric(t, reg, "billing_lock_lost_total", nil); got != 0 {
		t.Fatalf("lost = %v, want 0", got)
	}
}

// One Lock of many keys, one of which is taken away: Release deletes the
// others, names it, and leaves it alone.
func TestReleaseManyKeysOneStolen(t *testing.T) {
	r, c, reg := setup(t)
	ctx := context.Background()
	keys := lockKeys(r, "m-4", "m-1", "m-3", "m-2")
	l, err := c.Wait(ctx, keys, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.Keys(), keys) {
		t.Fatalf("Keys() = %v, want %v in the order asked", l.Keys(), keys)
	}
	for _, k := range keys {
		if got := r.Client.Get(ctx, k).Val(); got != l.Token() {
			t.Fatalf("%s = %q, want the token", k, got)
		}
	}
	r.Client.Set(ctx, keys[2], "someone-else", time.Minute)
	err = l.Release(ctx)
	if !errors.Is(err, lock.ErrNotHeld) || !strings.Contains(err.Error(), keys[2]) {
		t.Fatalf("Release = %v, want ErrNotHeld naming %s", err, keys[2])
	}
	for _, k := range []string{keys[0], keys[1], keys[3]} {
		if r.Client.Exists(ctx, k).Val() != 0 {
			t.Fatalf("%s still exists after Release", k)
		}
	}
	if got := r.Client.Get(ctx, keys[2]).Val(); got != "someone-else" {
		t.Fatalf("stolen key = %q: Release touched it", got)
	}
	if got := metric(t, reg, "billing_lock_lost_total", map[string]string{"reason": "not_held"}); got != 1 {
		t.Fatalf("lost{not_held} = %v, want 1", got)
	}
	if got := metric(t, reg, "billing_lock_obtain_total", map[string]string{"mode": "wait", "result": "obtained"}); got != 1 {
		t.Fatalf("wait obtained = %v, want 1 (one acquisition of 4 keys)", got)
	}
}

func TestRejectsBadArguments(t *testing.T) {
	r, c, _ := setup(t)
	ctx := context.Background()
	k := r.Keys.Lock("m-1")
	for _, tt := range []struct {
		name string
		keys []string
		ttl  time.Duration
	}{
		{"no key", nil, time.Second},
		{"empty key", []string{k, ""}, time.Second},
		{"key twice", []string{k, r.Keys.Lock("m-2"), k}, time.Second},
		{"zero ttl", []string{k}, 0},
		{"sub-millisecond ttl", []string{k}, time.Microsecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.keys) == 1 {
				if _, err := c.Obtain(ctx, tt.keys[0], tt.ttl); err == nil || errors.Is(err, lock.ErrNotObtained) {
					t.Fatalf("Obtain: err = %v, want a usage error", err)
				}
			}
			wctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			if _, err := c.Wait(wctx, tt.keys, tt.ttl); err == nil || errors.Is(err, lock.ErrNotObtained) {
				t.Fatalf("Wait: err = %v, want a usage error", err)
			}
		})
	}
	if n := r.Client.Exists(ctx, k).Val(); n != 0 {
		t.Fatal("a refused call left a lock behind")
	}
	if _, err := lock.New(nil, lock.Options{}); err == nil {
		t.Fatal("New(nil client) succeeded")
	}
}

// A's lock expires and B takes it: nothing A does may touch B's lock.
func TestExpiredHolderCannotTouchNewHolder(t *testing.T) {
	r, c, reg := setup(t)
	ctx := context.Background()
	key := r.Keys.Lock("m-1")

	a := expiring(t, c, key, 50*time.Millisecond)
	time.Sleep(150 * time.Millisecond)
	b, err := c.Obtain(ctx, key, 10*time.Second)
	if err != nil {
		t.Fatalf("B could not take the expired lock: %v", err)
	}

	if err := a.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("A.Release: err = %v, want ErrNotHeld", err)
	}
	if got := r.Client.Get(ctx, key).Val(); got != b.Token() {
		t.Fatalf("lock value = %q, want B's token %q", got, b.Token())
	}
	if ttl := r.Client.PTTL(ctx, key).Val(); ttl > 10*time.Second || ttl < 9*time.Second {
		t.Fatalf("B's PTTL = %v, want B's own 10s", ttl)
	}
	if err := a.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("A's second Release: err = %v, want ErrNotHeld", err)
	}
	if got := metric(t, reg, "billing_lock_lost_total", map[string]string{"reason": "not_held"}); got != 1 {
		t.Fatalf("lost{not_held} = %v, want 1 (counted once)", got)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// deductLua is the shape of the deduct script's fencing: the token check and
// the write happen in one call, on keys of one hash tag.
const deductLua = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('NOTHELD lock token mismatch')
end
return redis.call('HINCRBY', KEYS[2], 'remain', -tonumber(ARGV[2]))`

func deduct(ctx context.Context, rdb redis.Scripter, l *lock.Lock, quotaKey string, amount int) (int64, error) {
	return redis.NewScript(deductLua).Run(ctx, rdb, []string{l.Keys()[0], quotaKey}, l.Token(), amount).Int64()
}

func TestFencingTokenStopsLostHolder(t *testing.T) {
	r, c, _ := setup(t)
	ctx := context.Background()
	lockKey, quotaKey := r.Keys.Lock("m-7"), r.Keys.Quota("m-7")
	if err := r.Client.HSet(ctx, quotaKey, "remain", 100).Err(); err != nil {
		t.Fatal(err)
	}

	a := expiring(t, c, lockKey, 50*time.Millisecond)
	if remain, err := deduct(ctx, r.Client, a, quotaKey, 10); err != nil || remain != 90 {
		t.Fatalf("holder's deduct = %d, %v; want 90", remain, err)
	}
	time.Sleep(150 * time.Millisecond)
	b, err := c.Obtain(ctx, lockKey, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deduct(ctx, r.Client, a, quotaKey, 10); err == nil || !strings.Contains(err.Error(), "NOTHELD") {
		t.Fatalf("lost holder's deduct: err = %v, want NOTHELD", err)
	}
	if remain, err := deduct(ctx, r.Client, b, quotaKey, 5); err != nil || remain != 85 {
		t.Fatalf("new holder's deduct = %d, %v; want 85", remain, err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
