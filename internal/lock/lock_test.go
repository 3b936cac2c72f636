package lock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/testenv"
)

func TestObtainRelease(t *testing.T) {
	r, c, reg := setup(t)
	ctx := context.Background()
	key := r.Keys.Lock("m-1")

	l, err := c.Obtain(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if l.Key() != key || l.Token() == "" {
		t.Fatalf("Key() = %q, Token() = %q", l.Key(), l.Token())
	}
	if got := r.Client.Get(ctx, key).Val(); got != l.Token() {
		t.Fatalf("lock value = %q, want the token %q", got, l.Token())
	}
	if ttl, err := l.TTL(ctx); err != nil || ttl <= 59*time.Second || ttl > time.Minute {
		t.Fatalf("TTL() = %v, %v; want about 1m", ttl, err)
	}

	if _, err := c.Obtain(ctx, key, time.Minute); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("second Obtain: err = %v, want ErrNotObtained", err)
	}
	if err := l.Refresh(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if ttl := r.Client.PTTL(ctx, key).Val(); ttl <= time.Minute {
		t.Fatalf("PTTL after Refresh(2m) = %v", ttl)
	}

	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := r.Client.Exists(ctx, key).Val(); n != 0 {
		t.Fatal("key still exists after Release")
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("second Release: err = %v, want ErrNotHeld", err)
	}
	if _, err := l.TTL(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("TTL after Release: err = %v, want ErrNotHeld", err)
	}
	select {
	case <-l.Lost():
		t.Fatal("Lost() closed by a successful Release")
	default:
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

func TestObtainRejectsBadArguments(t *testing.T) {
	r, c, _ := setup(t)
	tests := []struct {
		name string
		key  string
		ttl  time.Duration
	}{
		{"empty key", "", time.Second},
		{"zero ttl", r.Keys.Lock("m-1"), 0},
		{"sub-millisecond ttl", r.Keys.Lock("m-1"), time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := c.Obtain(context.Background(), tt.key, tt.ttl); err == nil || errors.Is(err, lock.ErrNotObtained) {
				t.Fatalf("err = %v, want a usage error", err)
			}
		})
	}
}

// A's lock expires and B takes it: nothing A does may touch B's lock.
func TestExpiredHolderCannotTouchNewHolder(t *testing.T) {
	r, c, reg := setup(t)
	ctx := context.Background()
	key := r.Keys.Lock("m-1")

	a, err := c.Obtain(ctx, key, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	b, err := c.Obtain(ctx, key, 10*time.Second)
	if err != nil {
		t.Fatalf("B could not take the expired lock: %v", err)
	}

	if _, err := a.TTL(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("A.TTL: err = %v, want ErrNotHeld", err)
	}
	if err := a.Refresh(ctx, time.Hour); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("A.Refresh: err = %v, want ErrNotHeld", err)
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
	select {
	case <-a.Lost():
	default:
		t.Fatal("A.Lost() not closed")
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
	return redis.NewScript(deductLua).Run(ctx, rdb, []string{l.Key(), quotaKey}, l.Token(), amount).Int64()
}

func TestFencingTokenStopsLostHolder(t *testing.T) {
	r, c, _ := setup(t)
	ctx := context.Background()
	lockKey, quotaKey := r.Keys.Lock("m-7"), r.Keys.Quota("m-7")
	if err := r.Client.HSet(ctx, quotaKey, "remain", 100).Err(); err != nil {
		t.Fatal(err)
	}

	a, err := c.Obtain(ctx, lockKey, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
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

func TestNewRejectsBadOptions(t *testing.T) {
	r := testenv.NewRedis(t)
	tests := []struct {
		name string
		rdb  redis.UniversalClient
		opts lock.Options
		ok   bool
	}{
		{"defaults", r.Client, lock.Options{}, true},
		{"nil client", nil, lock.Options{}, false},
		{"negative RetryMin", r.Client, lock.Options{RetryMin: -1}, false},
		{"RetryMax below RetryMin", r.Client, lock.Options{RetryMin: time.Second, RetryMax: time.Millisecond}, false},
		{"RetryMin above default max", r.Client, lock.Options{RetryMin: time.Second}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := lock.New(tt.rdb, r.Keys, tt.opts)
			if (err == nil) != tt.ok {
				t.Fatalf("New: err = %v, want ok = %v", err, tt.ok)
			}
			if c != nil {
				_ = c.Close()
			}
		})
	}
}
