package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/testenv"
)

// newClient returns a lock Client closed when the test ends, and the registry
// its metrics are registered with.
func newClient(t testing.TB, rdb redis.UniversalClient, opts lock.Options) (*lock.Client, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	if opts.Metrics == nil {
		m, err := lock.NewMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		opts.Metrics = m
	}
	c, err := lock.New(rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, reg
}

// setup is the common case: a real Redis with a prefix of the test's own and a
// Client on it.
func setup(t testing.TB) (*testenv.Redis, *lock.Client, *prometheus.Registry) {
	t.Helper()
	r := testenv.NewRedis(t)
	c, reg := newClient(t, r.Client, lock.Options{})
	return r, c, reg
}

// metric sums the value of the samples of a counter or the count of a
// histogram named name whose labels include want.
func metric(t testing.TB, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for k, v := range want {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == k && lp.GetValue() == v {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

// waitDone waits up to limit for ctx to end and returns how long it took.
func waitDone(t testing.TB, ctx context.Context, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-ctx.Done():
		return time.Since(start)
	case <-time.After(limit):
		t.Fatalf("context not cancelled within %v", limit)
		return 0
	}
}

// requireLost checks that the Lock's context ended because a key was lost,
// and whether it was found not ours (rather than unrenewable in time).
func requireLost(t testing.TB, l *lock.Lock, notHeld bool) {
	t.Helper()
	cause := context.Cause(l.Context())
	if !errors.Is(cause, lock.ErrLost) {
		t.Fatalf("cause = %v, want ErrLost", cause)
	}
	if got := errors.Is(cause, lock.ErrNotHeld); got != notHeld {
		t.Fatalf("cause = %v: errors.Is(ErrNotHeld) = %v, want %v", cause, got, notHeld)
	}
}

func lockKeys(r *testenv.Redis, merchants ...string) []string {
	keys := make([]string, len(merchants))
	for i, m := range merchants {
		keys[i] = r.Keys.Lock(m)
	}
	return keys
}

// expiring obtains key for ttl and ends the Lock's context at once, so that
// nothing renews it: it expires with its TTL.
func expiring(t testing.TB, c *lock.Client, key string, ttl time.Duration) *lock.Lock {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l, err := c.Obtain(ctx, key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	return l
}

// deletePrefix deletes every key under prefix: what FLUSHALL does to a holder,
// without flushing a Redis that other tests share.
func deletePrefix(t testing.TB, rdb redis.UniversalClient, prefix string) int {
	t.Helper()
	ctx := context.Background()
	var n int
	iter := rdb.Scan(ctx, 0, prefix+"*", 100).Iterator()
	for iter.Next(ctx) {
		if err := rdb.Del(ctx, iter.Val()).Err(); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}
