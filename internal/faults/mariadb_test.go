package faults

import (
	"context"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/testenv"
)

// The workers' own mariadbd is killed (SIGKILL: crash recovery on restart)
// mid-load and restarted at seeded random moments. Transactions in flight are
// rolled back or were committed without the worker hearing so; either way
// the redelivered batch finds what is already in the ledger, nothing is lost
// or applied twice, and the outage dead-letters nothing.
func TestMariaDBRestart(t *testing.T) {
	t.Parallel()
	seed, rng := seeded(t)
	ctx, cancel := context.WithTimeout(context.Background(), size(2*time.Minute, 15*time.Minute))
	defer cancel()
	db := testenv.StartMariaDB(t)
	g := newRig(t, rigOptions{partitions: 4, mariadb: db})
	tr := traffic(t, seed, mixedLoad("mdb-"), size(2500, 30000), 5)
	g.grantTraffic(ctx, tr.Merchants(), 5000)
	procs := []*proc{g.startProc(1, nil), g.startProc(2, nil)}
	load := g.startLoad(ctx, tr.Messages, size(250, 500))

	start := time.Now()
	for range size(1, 5) {
		time.Sleep(between(rng, 1500*time.Millisecond, 4*time.Second))
		if !load.running() {
			break
		}
		down := between(rng, 500*time.Millisecond, 3*time.Second)
		db.Kill()
		killed := time.Now()
		t.Logf("%5.1fs: mariadbd killed (%d/%d messages produced), down for %v",
			time.Since(start).Seconds(), load.sent.Load(), len(tr.Messages), down.Round(time.Millisecond))
		if err := waitUnready(ctx, procs[0].Addr(), "mysql", down+2*time.Second); err != nil {
			t.Errorf("during the outage: %v", err)
		}
		time.Sleep(time.Until(killed.Add(down)))
		db.Start()
		t.Logf("%5.1fs: mariadbd back", time.Since(start).Seconds())
	}
	if err := load.wait(); err != nil {
		t.Fatal(err)
	}
	g.drain(ctx, 90*time.Second)
	for _, p := range procs {
		p.Stop()
	}
	g.settle(ctx, newTruth(tr).produced)
}
