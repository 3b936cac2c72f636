package lock_test

import (
	"context"
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
// merchant when busy). Against a release notification by pub/sub (commit
// 49edaf6 measured both), polling cost the worker's throughput nothing beyond
// noise and the grant a few milliseconds of waiting, so the notification went.
func BenchmarkContention(b *testing.B) {
	const (
		batchHold  = 3 * time.Millisecond // a batch's Lua calls and MySQL transaction
		batchGap   = time.Millisecond     // assembling the next batch
		grantEvery = 20 * time.Millisecond
		grantHold  = 3 * time.Millisecond
		reconEvery = 10 * time.Millisecond
		reconHold  = time.Millisecond
	)
	r := testenv.NewRedis(b)
	worker, _ := newClient(b, r.Client, lock.Options{})
	granter, _ := newClient(b, r.Client, lock.Options{})
	recon, _ := newClient(b, r.Client, lock.Options{})
	key := []string{r.Keys.Lock("m-hot")}
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
			l, err := granter.Wait(ctx, key, time.Minute)
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
			l, err := recon.Obtain(ctx, key[0], time.Minute)
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
		l, err := worker.Wait(ctx, key, time.Minute)
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
