package faults

import (
	"context"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/workload"
)

// mixedLoad is the traffic shape most scenarios use: one hot merchant, small
// amounts, some duplicates and poison messages.
func mixedLoad(prefix string) workload.Config {
	return workload.Config{Merchants: 40, Skew: workload.Skew{Kind: workload.Hot, Param: 0.2},
		MinAmount: 1, MaxAmount: 9, Duplicates: 0.05, Malformed: 0.03, IDPrefix: prefix}
}

// Two worker processes consume while, at seeded random moments, one of them
// is killed with SIGKILL (no drain, no commit, locks and lease left to
// expire) and restarted with the same worker ID: size(3, 12) kills, all while
// the load runs. Every event still ends with exactly one ledger row, and the
// balances add up.
func TestKillWorkerProcesses(t *testing.T) {
	t.Parallel()
	// 16s of load in CI for 3 kills of at most 3s + 1s each.
	killScenario(t, newPlan(t), size(3, 12), size(4000, 40000))
}

// killScenario kills a worker process kills times while n messages flow.
func killScenario(t *testing.T, p *plan, kills, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), size(2*time.Minute, 15*time.Minute))
	defer cancel()
	g := newRig(t, rigOptions{partitions: 4})
	p.use(g)
	tr := traffic(t, p.seed(), mixedLoad("kill-"), n, 5)
	g.grantTraffic(ctx, tr.Merchants(), 5000)
	procs := []*proc{g.startProc(1, nil), g.startProc(2, nil)}
	load := p.startLoad(ctx, tr.Messages, size(250, 500))

	for range kills {
		p.await(ctx, between(p.rng, time.Second, 3*time.Second))
		p.killOne(ctx, procs)
	}
	if err := load.wait(); err != nil {
		t.Fatal(err)
	}
	p.expect("kill", kills)
	g.drain(ctx, 90*time.Second)
	for _, p := range procs {
		p.Stop()
	}
	g.settle(ctx, newTruth(tr).produced)
}

// killOne SIGKILLs one of procs at random and starts it again after up to a
// second down.
func (p *plan) killOne(ctx context.Context, procs []*proc) {
	p.t.Helper()
	victim := procs[p.rng.IntN(len(procs))]
	down := between(p.rng, 0, time.Second)
	p.fired(ctx, "kill", victim.name, "down "+down.Round(time.Millisecond).String())
	victim.Kill()
	time.Sleep(down)
	victim.Start()
}
