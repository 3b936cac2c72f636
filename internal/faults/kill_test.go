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
// expire) and restarted with the same worker ID. Every event still ends with
// exactly one ledger row, and the balances add up.
func TestKillWorkerProcesses(t *testing.T) {
	t.Parallel()
	seed, rng := seeded(t)
	ctx, cancel := context.WithTimeout(context.Background(), size(2*time.Minute, 15*time.Minute))
	defer cancel()
	g := newRig(t, rigOptions{partitions: 4})
	tr := traffic(t, seed, mixedLoad("kill-"), size(3000, 40000), 5)
	g.grantTraffic(ctx, tr.Merchants(), 5000)
	procs := []*proc{g.startProc(1, nil), g.startProc(2, nil)}
	load := g.startLoad(ctx, tr.Messages, size(250, 500))

	start, kills := time.Now(), 0
	for {
		select {
		case <-load.done:
		case <-time.After(between(rng, 1500*time.Millisecond, 4*time.Second)):
			victim := procs[rng.IntN(len(procs))]
			victim.Kill()
			kills++
			t.Logf("%5.1fs: kill -9 %s (%d/%d messages produced)", time.Since(start).Seconds(), victim.name, load.sent.Load(), len(tr.Messages))
			time.Sleep(between(rng, 0, time.Second))
			victim.Start()
			continue
		}
		break
	}
	if err := load.wait(); err != nil {
		t.Fatal(err)
	}
	if kills == 0 {
		t.Fatal("the load ended before any kill")
	}
	g.drain(ctx, 90*time.Second)
	t.Logf("%5.1fs: drained after %d kills", time.Since(start).Seconds(), kills)
	for _, p := range procs {
		p.Stop()
	}
	g.settle(ctx, newTruth(tr).produced)
}
