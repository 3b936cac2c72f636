package idgen

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/dial"
	"github.com/quotaflow/billing/internal/testenv"
)

// Redis stops answering holder A without closing the connection (a
// partition, a frozen proxy): A's lease turns invalid, and its generator
// refuses, before holder B, on a Redis it still reaches, can take the ID.
func TestLeaseSilentRedis(t *testing.T) {
	const ttl = 600 * time.Millisecond
	r := testenv.NewRedis(t)
	proxy := testenv.NewProxy(t, r.Addr)
	rdb, err := dial.Redis(config.Redis{Addrs: []string{proxy.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	a, err := AcquireLease(context.Background(), rdb, r.Keys, 15, holderA, zaptest.NewLogger(t), LeaseOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	ga := newTestGenerator(t, 15, Options{Lease: a})
	stop := runLease(t, a)
	time.Sleep(ttl / 2) // a renewal at TTL/3 went through
	aLast := mustNext(t, ga)

	proxy.Pause()
	paused := time.Now()
	var b *Lease
	for b == nil {
		b, err = AcquireLease(context.Background(), r.Client, r.Keys, 15, holderB, zap.NewNop(), LeaseOptions{TTL: ttl})
		switch {
		case err == nil:
		case !errors.Is(err, ErrWorkerHeld):
			t.Fatal(err)
		case time.Since(paused) > 10*ttl:
			t.Fatal("the silent holder's lease never expired")
		default:
			time.Sleep(time.Millisecond)
		}
	}
	obtained := time.Since(paused)
	// AcquireLease returned after B's SET NX: A must have stopped by then.
	if a.Valid() {
		t.Fatalf("B acquired the worker ID %v after the pause while A's lease was valid", obtained)
	}
	if id, err := ga.NextID(); !errors.Is(err, ErrLeaseNotValid) {
		t.Fatalf("A issued %d (%v) after B acquired the worker ID", id, err)
	}
	gb := newTestGenerator(t, 15, Options{Lease: b})
	if id := mustNext(t, gb); id <= aLast {
		t.Fatalf("B's ID %d not after A's %d", id, aLast)
	}
	t.Logf("B acquired %v after the pause", obtained)
	proxy.Resume()
	if err := b.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil && !errors.Is(err, ErrLeaseNotHeld) {
		t.Fatalf("A's Run: %v", err)
	}
}
