package lock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/testenv"
)

// Uncontended Obtain + Release: two round trips (SET NX PX, release script).
func BenchmarkObtainRelease(b *testing.B) {
	r, c, _ := setup(b)
	ctx := context.Background()
	key := r.Keys.Lock("m-1")
	start := time.Now()
	for b.Loop() {
		l, err := c.Obtain(ctx, key, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "locks/s")
}

// Contended handoff: goroutines take turns on one lock. After releasing, a
// holder waits until someone else took the lock before it waits again, so
// every acquisition is a handoff to a goroutine that was already waiting
// (subscribed). Handoff = from the start of Release to the return of the
// waiter's Wait: the release script, the notification, and the waiter's
// SET NX.
func BenchmarkHandoff(b *testing.B) {
	for _, bc := range []struct {
		name       string
		goroutines int
		clients    int
	}{
		{"clients=4", 4, 4}, // one Client per goroutine: handoff between "workers"
		{"shared=4", 4, 1},  // one Client for all: handoff between lanes of a worker
		{"waiters=16/clients=4", 16, 4},
	} {
		b.Run(bc.name, func(b *testing.B) { benchHandoff(b, bc.goroutines, bc.clients) })
	}
}

func benchHandoff(b *testing.B, goroutines, clients int) {
	r := testenv.NewRedis(b)
	cs := make([]*lock.Client, clients)
	for i := range cs {
		cs[i], _ = newClient(b, r.Client, r.Keys, lock.Options{})
	}
	key := r.Keys.Lock("m-hot")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var (
		mu        sync.Mutex
		cond      = sync.NewCond(&mu)
		gen       int // acquisitions so far
		releaseAt time.Time
		handoffs  = make([]time.Duration, 0, b.N)
	)
	acquired := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if !releaseAt.IsZero() {
			handoffs = append(handoffs, time.Since(releaseAt))
		}
		gen++
		cond.Broadcast()
		return gen <= b.N
	}
	// waitHandedOver blocks until the lock was taken after acquisition mine.
	waitHandedOver := func(mine int) {
		mu.Lock()
		for gen == mine && ctx.Err() == nil {
			cond.Wait()
		}
		mu.Unlock()
	}

	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range goroutines {
		c := cs[i%clients]
		wg.Go(func() {
			for {
				l, err := c.Wait(ctx, key, time.Minute)
				if errors.Is(err, lock.ErrNotObtained) && ctx.Err() != nil {
					return
				}
				if err != nil {
					b.Error(err)
					cancel()
					return
				}
				more := acquired()
				mu.Lock()
				mine := gen
				releaseAt = time.Now()
				mu.Unlock()
				if err := l.Release(ctx); err != nil && ctx.Err() == nil {
					b.Error(err)
				}
				if !more {
					cancel()
					mu.Lock()
					cond.Broadcast()
					mu.Unlock()
					return
				}
				waitHandedOver(mine)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if len(handoffs) == 0 {
		return
	}
	slices.Sort(handoffs)
	pct := func(p float64) float64 {
		return float64(handoffs[int(p*float64(len(handoffs)-1))].Microseconds())
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(float64(handoffs[len(handoffs)-1].Microseconds()), "max-µs")
}
