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
	p := newPlan(t)
	ctx, cancel := context.WithTimeout(context.Background(), size(2*time.Minute, 15*time.Minute))
	defer cancel()
	db := testenv.StartMariaDB(t)
	g := newRig(t, rigOptions{partitions: 4, mariadb: db})
	p.use(g)
	// 16s of load in CI for 2 restarts of at most 2.5s + 2s down + the
	// restart (crash recovery, 1-3s here) each.
	tr := traffic(t, p.seed(), mixedLoad("mdb-"), size(4000, 30000), 5)
	g.grantTraffic(ctx, tr.Merchants(), 5000)
	procs := []*proc{g.startProc(1, nil), g.startProc(2, nil)}
	load := p.startLoad(ctx, tr.Messages, size(250, 500))

	restarts := size(2, 5)
	for range restarts {
		p.await(ctx, between(p.rng, time.Second, 2500*time.Millisecond))
		down := between(p.rng, 500*time.Millisecond, 2*time.Second)
		p.fired(ctx, "mariadb killed", "", "down "+down.Round(time.Millisecond).String())
		db.Kill()
		killed := time.Now()
		if err := waitUnready(ctx, procs[0].Addr(), "mysql", down+2*time.Second); err != nil {
			t.Errorf("during the outage: %v", err)
		}
		time.Sleep(time.Until(killed.Add(down)))
		db.Start()
	}
	if err := load.wait(); err != nil {
		t.Fatal(err)
	}
	p.expect("mariadb killed", restarts)
	g.drain(ctx, 90*time.Second)
	for _, p := range procs {
		p.Stop()
	}
	g.settle(ctx, newTruth(tr).produced)
}
