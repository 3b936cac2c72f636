package faults

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/workload"
)

// A worker process is frozen with SIGSTOP (a long GC pause, a stalled VM)
// while it holds merchant locks mid-batch, for longer than the lock TTL and
// its group session. A second worker takes over its partitions and its
// merchants; then the first is thawed (SIGCONT) and carries on from where it
// stopped, with a lock it no longer holds. The fencing (every script checks
// the lock token; the ledger's unique event_id and the balance guard behind
// it) must stop it from applying anything twice; what it dead-letters again
// is a copy of a record of the same provenance, never a second message.
func TestPausedWorkerIsFenced(t *testing.T) {
	t.Parallel()
	seed, rng := seeded(t)
	ctx, cancel := context.WithTimeout(context.Background(), size(2*time.Minute, 15*time.Minute))
	defer cancel()
	g := newRig(t, rigOptions{partitions: 4})
	cfg := mixedLoad("pause-")
	cfg.Skew = workload.Skew{Kind: workload.Hot, Param: 0.4} // one merchant nearly always locked
	tr := traffic(t, seed, cfg, size(4000, 30000), 5)
	g.grantTraffic(ctx, tr.Merchants(), 10000)
	a := g.startProc(1, nil)
	load := g.startLoad(ctx, tr.Messages, size(250, 500))
	start := time.Now()
	if err := waitCounter(ctx, a, `billing_events_total{outcome="applied"}`, 50, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	// Freeze it at a moment it holds merchant locks (only it runs: every lock is its own).
	var held map[string]string
	for try := 1; ; try++ {
		a.Pause()
		held = g.lockHolders(ctx)
		if len(held) > 0 {
			t.Logf("%5.1fs: SIGSTOP %s holding %d merchant lock(s) %s (try %d; %d/%d messages produced)",
				time.Since(start).Seconds(), a.name, len(held), names(held), try, load.sent.Load(), len(tr.Messages))
			break
		}
		a.Resume()
		if try == 200 {
			t.Fatalf("%s never held a lock in %d tries", a.name, try)
		}
		time.Sleep(between(rng, 5*time.Millisecond, 60*time.Millisecond))
	}
	paused := time.Now()
	b := g.startProc(2, nil)
	// The second worker gets the partitions once the frozen one's session has
	// expired, and the frozen one's locks expire or are taken over.
	if err := waitCounter(ctx, b, `billing_events_total{outcome="applied"}`, 1, 45*time.Second); err != nil {
		t.Fatalf("the second worker never took over: %v", err)
	}
	for {
		now := g.lockHolders(ctx)
		still := 0
		for k, tok := range held {
			if now[k] == tok {
				still++
			}
		}
		if still == 0 && time.Since(paused) > 2*lockTTL {
			break
		}
		if time.Since(paused) > 45*time.Second {
			t.Fatalf("%d lock(s) of the frozen worker still held after 45s", still)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(between(rng, 0, 2*time.Second)) // the other worker keeps going on the same merchants
	a.Resume()
	t.Logf("%5.1fs: SIGCONT %s after %v frozen (lock TTL %v, session %v); %s had applied %.0f events",
		time.Since(start).Seconds(), a.name, time.Since(paused).Round(time.Millisecond), lockTTL, sessionTimeout,
		b.name, b.Total(ctx).outcome("applied"))

	if err := load.wait(); err != nil {
		t.Fatal(err)
	}
	g.drain(ctx, 90*time.Second)
	am, bm := a.Total(ctx), b.Total(ctx)
	t.Logf("%5.1fs: drained; the thawed worker saw its lock lost in %.0f batch(es), %.0f batch failure(s); the group re-processed %.0f duplicate(s)",
		time.Since(start).Seconds(), am.Sum("billing_deduct_lock_lost_total"), am.Sum("billing_deduct_batch_failures_total"),
		am.outcome("duplicate")+bm.outcome("duplicate"))
	t.Logf("dead letters: %s published %.0f, %s published %.0f",
		a.name, am.Sum("billing_dlq_published_total"), b.name, bm.Sum("billing_dlq_published_total"))
	a.Stop()
	b.Stop()
	g.settle(ctx, newTruth(tr).produced)
}

// lockHolders returns every merchant lock key of the rig with its token.
func (g *rig) lockHolders(ctx context.Context) map[string]string {
	out := map[string]string{}
	iter := g.rdb.Scan(ctx, 0, g.keys.Prefix()+"lock:*", 1000).Iterator()
	for iter.Next(ctx) {
		if v, err := g.rdb.Get(ctx, iter.Val()).Result(); err == nil {
			out[iter.Val()] = v
		}
	}
	return out
}

func names(m map[string]string) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k[strings.LastIndexByte(k, ':')+1:])
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

// waitCounter waits until a worker's counter reaches at least min.
func waitCounter(ctx context.Context, p *proc, key string, min float64, within time.Duration) error {
	deadline := time.Now().Add(within)
	var last float64
	for time.Now().Before(deadline) {
		if m, err := p.Scrape(ctx); err == nil {
			if last = m.Get(key); last >= min {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s: %s = %v after %v, want >= %v", p.name, key, last, within, min)
}
