package faults

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/testenv"
)

// The workers' own redis-server is killed mid-load and restarted empty (no
// persistence: every quota hash, pending deduction, lock and worker-ID lease
// is gone), at seeded random moments. The workers wait out the outage,
// rebuild each merchant's quota from MySQL on its next event, and nothing is
// lost, applied twice or dead-lettered.
func TestRedisRestartLosesData(t *testing.T) {
	t.Parallel()
	seed, rng := seeded(t)
	ctx, cancel := context.WithTimeout(context.Background(), size(2*time.Minute, 15*time.Minute))
	defer cancel()
	srv := testenv.StartRedisServer(t)
	g := newRig(t, rigOptions{partitions: 4, redisAddrs: []string{srv.Addr()}})
	tr := traffic(t, seed, mixedLoad("rlost-"), size(2500, 30000), 5)
	g.grantTraffic(ctx, tr.Merchants(), 5000)
	procs := []*proc{g.startProc(1, nil), g.startProc(2, nil)}
	load := g.startLoad(ctx, tr.Messages, size(250, 500))

	start := time.Now()
	for range size(1, 6) {
		time.Sleep(between(rng, 1500*time.Millisecond, 4*time.Second))
		if !load.running() {
			break
		}
		down := between(rng, 200*time.Millisecond, 1500*time.Millisecond)
		keys := g.rdb.DBSize(ctx).Val()
		srv.Kill()
		t.Logf("%5.1fs: redis-server killed with %d keys (%d/%d messages produced), down for %v",
			time.Since(start).Seconds(), keys, load.sent.Load(), len(tr.Messages), down.Round(time.Millisecond))
		time.Sleep(down)
		srv.Start()
	}
	if err := load.wait(); err != nil {
		t.Fatal(err)
	}
	g.drain(ctx, 90*time.Second)
	hydrations := sumOver(ctx, procs, "billing_deduct_hydrations_total")
	for _, p := range procs {
		p.Stop()
	}
	t.Logf("%5.1fs: drained; quota hashes rebuilt from MySQL: %.0f", time.Since(start).Seconds(), hydrations)
	g.settle(ctx, newTruth(tr).produced)
}

// Redis (with an append-only file, so its data survives) is down for longer
// than the lock TTL and the worker-ID lease while events flow: every held
// merchant lock expires during the outage and every lease lapses. /readyz
// says so; afterwards the workers take their locks and leases again and the
// pending deductions left in Redis are reused or confirmed, never applied twice.
func TestRedisDownLongerThanLockTTL(t *testing.T) {
	t.Parallel()
	seed, rng := seeded(t)
	ctx, cancel := context.WithTimeout(context.Background(), size(2*time.Minute, 15*time.Minute))
	defer cancel()
	srv := testenv.StartRedisServer(t, "--appendonly", "yes", "--appendfsync", "always")
	g := newRig(t, rigOptions{partitions: 4, redisAddrs: []string{srv.Addr()}})
	tr := traffic(t, seed, mixedLoad("rdown-"), size(3000, 30000), 5)
	g.grantTraffic(ctx, tr.Merchants(), 5000)
	procs := []*proc{g.startProc(1, nil), g.startProc(2, nil)}
	load := g.startLoad(ctx, tr.Messages, size(250, 500))

	start := time.Now()
	for range size(1, 4) {
		time.Sleep(between(rng, 1500*time.Millisecond, 3*time.Second))
		if !load.running() {
			break
		}
		down := between(rng, 5*lockTTL/2, 7*lockTTL/2)
		srv.Kill()
		killed := time.Now()
		t.Logf("%5.1fs: redis-server killed (%d/%d messages produced), down for %v (lock TTL %v)",
			time.Since(start).Seconds(), load.sent.Load(), len(tr.Messages), down.Round(time.Millisecond), lockTTL)
		if err := waitUnready(ctx, procs[0].Addr(), "redis", down); err != nil {
			t.Errorf("during the outage: %v", err)
		}
		time.Sleep(time.Until(killed.Add(down))) // the rest of the outage, if any
		srv.Start()
		t.Logf("%5.1fs: redis-server back with %d keys from its append-only file", time.Since(start).Seconds(), g.rdb.DBSize(ctx).Val())
	}
	if err := load.wait(); err != nil {
		t.Fatal(err)
	}
	g.drain(ctx, 90*time.Second)
	lost := sumOver(ctx, procs, "billing_deduct_lock_lost_total")
	for _, p := range procs {
		p.Stop()
	}
	t.Logf("%5.1fs: drained; batches that found their lock lost: %.0f", time.Since(start).Seconds(), lost)
	g.settle(ctx, newTruth(tr).produced)
}

// waitUnready waits until a worker's /readyz fails naming dep.
func waitUnready(ctx context.Context, addr, dep string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
		if err != nil {
			return err
		}
		req.Close = true
		if resp, err := http.DefaultClient.Do(req); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = resp.Status + " " + strings.TrimSpace(string(body))
			if resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(body), dep) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return &readyError{dep: dep, last: last}
		case <-time.After(100 * time.Millisecond):
		}
	}
}

type readyError struct{ dep, last string }

func (e *readyError) Error() string {
	return "/readyz never failed naming " + e.dep + "; last answer: " + e.last
}

// sumOver adds a metric over the running worker processes.
func sumOver(ctx context.Context, procs []*proc, name string) float64 {
	var s float64
	for _, p := range procs {
		s += p.Total(ctx).Sum(name)
	}
	return s
}
