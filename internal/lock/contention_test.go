package lock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/testenv"
)

// BenchmarkContention is the worker's real contention on one merchant, each
// party on a Client of its own: the worker takes the lock batch after batch
// (holding it through a batch, then assembling the next), a grant waits for it
// now and then, and a reconciler tries it once now and then (skipping the
// merchant when busy). "notify" waits with Wait (release notification, polling
// as fallback); "poll" waits by trying with the same jittered backoff alone.
func BenchmarkContention(b *testing.B) {
	b.Run("notify", func(b *testing.B) { benchContention(b, 0, 0) })
	b.Run("poll=5-50ms", func(b *testing.B) { benchContention(b, 5*time.Millisecond, 50*time.Millisecond) })
	b.Run("poll=1-10ms", func(b *testing.B) { benchContention(b, time.Millisecond, 10*time.Millisecond) })
	b.Run("poll=1-5ms", func(b *testing.B) { benchContention(b, time.Millisecond, 5*time.Millisecond) })
}

const (
	batchHold  = 3 * time.Millisecond // a batch's Lua calls and MySQL transaction
	batchGap   = time.Millisecond     // assembling the next batch
	grantEvery = 20 * time.Millisecond
	grantHold  = 3 * time.Millisecond
	reconEvery = 10 * time.Millisecond
	reconHold  = time.Millisecond
)

func benchContention(b *testing.B, pollMin, pollMax time.Duration) {
	r := testenv.NewRedis(b)
	worker, _ := newClient(b, r.Client, r.Keys, lock.Options{})
	granter, _ := newClient(b, r.Client, r.Keys, lock.Options{})
	recon, _ := newClient(b, r.Client, r.Keys, lock.Options{})
	key := r.Keys.Lock("m-hot")
	wait := func(ctx context.Context, c *lock.Client) (*lock.Lock, error) {
		if pollMin > 0 {
			return pollWait(ctx, c, key, pollMin, pollMax)
		}
		return c.Wait(ctx, key, time.Minute)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var (
		mu          sync.Mutex
		grantWaits  []time.Duration
		tries, busy int
		wg          sync.WaitGroup
	)
	holdAndRelease := func(l *lock.Lock, d time.Duration) {
		time.Sleep(d)
		if err := l.Release(context.Background()); err != nil {
			b.Error(err)
		}
	}
	wg.Go(func() { // the grant
		for ctx.Err() == nil {
			time.Sleep(grantEvery)
			start := time.Now()
			l, err := wait(ctx, granter)
			if err != nil {
				return
			}
			mu.Lock()
			grantWaits = append(grantWaits, time.Since(start))
			mu.Unlock()
			holdAndRelease(l, grantHold)
		}
	})
	wg.Go(func() { // the reconciler
		for ctx.Err() == nil {
			time.Sleep(reconEvery)
			l, err := recon.Obtain(ctx, key, time.Minute)
			mu.Lock()
			tries++
			if err != nil {
				busy++
			}
			mu.Unlock()
			if err == nil {
				holdAndRelease(l, reconHold)
			}
		}
	})

	workerWaits := make([]time.Duration, 0, b.N)
	start := time.Now()
	for b.Loop() {
		t := time.Now()
		l, err := wait(ctx, worker)
		if err != nil {
			b.Fatal(err)
		}
		workerWaits = append(workerWaits, time.Since(t))
		holdAndRelease(l, batchHold)
		time.Sleep(batchGap)
	}
	elapsed := time.Since(start)
	cancel()
	wg.Wait()
	b.ReportMetric(float64(len(workerWaits))/elapsed.Seconds(), "batches/s")
	b.ReportMetric(pct(workerWaits, 0.99), "worker-p99-µs")
	b.ReportMetric(mean(workerWaits), "worker-mean-µs")
	b.ReportMetric(pct(grantWaits, 0.50), "grant-p50-µs")
	b.ReportMetric(pct(grantWaits, 0.99), "grant-p99-µs")
	if tries > 0 {
		b.ReportMetric(float64(busy)/float64(tries), "recon-busy")
	}
}

// pollWait is Wait without notifications: try, then sleep a jittered backoff
// of 5ms doubling up to 50ms (Wait's defaults), until obtained.
func pollWait(ctx context.Context, c *lock.Client, key string, lo, hi time.Duration) (*lock.Lock, error) {
	d := lo
	for {
		l, err := c.Obtain(ctx, key, time.Minute)
		if !errors.Is(err, lock.ErrNotObtained) {
			return l, err
		}
		t := time.NewTimer(d/2 + rand.N(d/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		d = min(2*d, hi)
	}
}

func pct(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	return float64(s[int(p*float64(len(s)-1))].Microseconds())
}

func mean(ds []time.Duration) float64 {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return float64(sum.Microseconds()) / float64(max(len(ds), 1))
}
