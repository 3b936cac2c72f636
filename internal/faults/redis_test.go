package faults

import (
	"context"
	"fmt"
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
	p := newPlan(t)
	ctx, cancel := context.WithTimeout(context.Background(), size(2*time.Minute, 15*time.Minute))
	defer cancel()
	srv := testenv.StartRedisServer(t)
	g := newRig(t, rigOptions{partitions: 4, redisAddrs: []string{srv.Addr()}})
	p.use(g)
	// 12s of load in CI for 2 restarts of at most 2.5s + 1.5s down each.
	tr := traffic(t, p.seed(), mixedLoad("rlost-"), size(3000, 30000), 5)
	g.grantTraffic(ctx, tr.Merchants(), 5000)
	procs := []*proc{g.startProc(1, nil), g.startProc(2, nil)}
	load := p.startLoad(ctx, tr.Messages, size(250, 500))

	restarts := size(2, 6)
	for range restarts {
		p.await(ctx, between(p.rng, time.Second, 2500*time.Millisecond))
		down := between(p.rng, 200*time.Millisecond, 1500*time.Millisecond)
		p.fired(ctx, "redis lost", "", fmt.Sprintf("%d keys, down %v", g.rdb.DBSize(ctx).Val(), down.Round(time.Millisecond)))
		srv.Kill()
		time.Sleep(down)
		srv.Start()
	}
	if err := load.wait(); err != nil {
		t.Fatal(err)
	}
	p.expect("redis lost", restarts)
	g.drain(ctx, 90*time.Second)
	hydrations := sumOver(ctx, procs, "billing_deduct_hydrations_total")
	for _, p := range procs {
		p.Stop()
	}
	t.Logf("drained; quota hashes rebuilt from MySQL: %.0f", hydrations)
	g.settle(ctx, newTruth(tr).produced)
}

// Redis (with an append-only file, so its data survives) is down for longer
// than the lock TTL and the worker-ID lease while events flow: every held
// merchant lock expires during the outage and every lease lapses. /readyz
// says so; afterwards the workers take their locks and leases again and the
// pending deductions left in Redis are reused or confirmed, never applied twice.
func TestRedisDownLongerThanLockTTL(t *testing.T) {
	t.Parallel()
	p := newPlan(t)
	ctx, cancel := context.WithTimeout(context.Background(), size(2*time.Minute, 15*time.Minute))
	defer cancel()
	srv := testenv.StartRedisServer(t, "--appendonly", "yes", "--appendfsync", "always")
	g := newRig(t, rigOptions{partitions: 4, redisAddrs: []string{srv.Addr()}})
	p.use(g)
	// 14s of load in CI for one outage of at most 3s + 7s.
	tr := traffic(t, p.seed(), mixedLoad("rdown-"), size(3500, 30000), 5)
	g.grantTraffic(ctx, tr.Merchants(), 5000)
	procs := []*proc{g.startProc(1, nil), g.startProc(2, nil)}
	load := p.startLoad(ctx, tr.Messages, size(250, 500))

	outages := size(1, 4)
	for range outages {
		p.await(ctx, between(p.rng, 1500*time.Millisecond, 3*time.Second))
		down := between(p.rng, 5*lockTTL/2, 7*lockTTL/2)
		p.fired(ctx, "redis down", "", fmt.Sprintf("down %v (lock TTL %v)", down.Round(time.Millisecond), lockTTL))
		srv.Kill()
		killed := time.Now()
		if err := waitUnready(ctx, procs[0].Addr(), "redis", down); err != nil {
			t.Errorf("during the outage: %v", err)
		}
		time.Sleep(time.Until(killed.Add(down))) // the rest of the outage, if any
		srv.Start()
		t.Logf("redis-server back with %d keys from its append-only file", g.rdb.DBSize(ctx).Val())
	}
	if err := load.wait(); err != nil {
		t.Fatal(err)
	}
	p.expect("redis down", outages)
	g.drain(ctx, 90*time.Second)
	lost := sumOver(ctx, procs, "billing_deduct_lock_lost_total")
	for _, p := range procs {
		p.Stop()
	}
	t.Logf("drained; batches that found their lock lost: %.0f", lost)
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
