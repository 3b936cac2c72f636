package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Three worker processes share the group under steady load while one of them,
// chosen at random, is killed with SIGKILL and restarted every few seconds
// (20s of churn in CI, 70s with -faults.long). The invariants hold, and the
// events a kill makes the group process again (its uncommitted window,
// counted as the ledger's "duplicate" outcome; the traffic itself has no
// duplicates) stay bounded by the in-flight window of the partitions.
//
// The bound: the workers run with WORKER_MAX_INFLIGHT=64, so at most 64
// messages of a partition lie between fetch and commit, and a kill (with the
// rebalances it causes) can undo at most that window of each of the 6
// partitions: 384 events. That is below the least traffic between two kills
// (3s x 200/s = 600 in CI, 900 with -faults.long), so a group that redid
// everything since the previous kill (no periodic commit) would exceed it.
// (Measured in 5 runs: 0 to 15 per kill.)
func TestChurnThreeWorkers(t *testing.T) {
	t.Parallel()
	p := newPlan(t)
	churn := size(20*time.Second, 70*time.Second)
	rate := size(200, 300)
	const partitions, window = 6, 64
	ctx, cancel := context.WithTimeout(context.Background(), churn+3*time.Minute)
	defer cancel()
	g := newRig(t, rigOptions{partitions: partitions})
	p.use(g)
	cfg := mixedLoad("churn-")
	cfg.Duplicates = 0 // every duplicate outcome is then a redelivery
	// The load outlasts the churn: the last kill starts before churn ends
	// and its restart takes at most 0.5s.
	tr := traffic(t, p.seed(), cfg, rate*int((churn+2*time.Second)/time.Second), 3)
	g.grantTraffic(ctx, tr.Merchants(), 20000)
	inflight := map[string]string{"WORKER_MAX_INFLIGHT": fmt.Sprint(window)}
	procs := []*proc{g.startProc(1, inflight), g.startProc(2, inflight), g.startProc(3, inflight)}
	load := p.startLoad(ctx, tr.Messages, rate)

	duplicates := func() float64 {
		var d float64
		for _, p := range procs {
			d += outcome(p.Total(ctx), "duplicate")
		}
		return d
	}
	start := time.Now()
	var perKill []float64
	var marks []float64 // total duplicates just before each kill
	// Live, kills go on until churn has passed (at least churn/6s of them);
	// a replay makes as many as its schedule has.
	for i := 0; p.more(i, time.Since(start) < churn-6*time.Second); i++ {
		p.await(ctx, between(p.rng, 3*time.Second, 6*time.Second))
		victim := procs[p.rng.IntN(len(procs))]
		marks = append(marks, duplicates()) // the victim's counters are scraped again, just before it dies
		p.fired(ctx, "kill", victim.name, "")
		victim.ScrapeAndKill(ctx)
		time.Sleep(between(p.rng, 0, 500*time.Millisecond))
		victim.Start()
	}
	if err := load.wait(); err != nil {
		t.Fatal(err)
	}
	g.drain(ctx, 2*time.Minute)
	final := duplicates()
	var handled float64
	for _, p := range procs {
		handled += p.Total(ctx).Sum("billing_events_total")
	}
	for i := range marks {
		next := final
		if i+1 < len(marks) {
			next = marks[i+1]
		}
		perKill = append(perKill, next-marks[i])
	}
	for _, p := range procs {
		p.Stop()
	}
	rep, _ := g.settle(ctx, newTruth(tr).produced)

	unique := float64(rep.Checked["valid unique events"])
	bound := float64(window * partitions)
	var worst, sum float64
	for _, d := range perKill {
		worst, sum = max(worst, d), sum+d
	}
	t.Logf("%d kills in %v: duplicates re-processed per kill %s (mean %.1f, max %.0f, bound %.0f = WORKER_MAX_INFLIGHT %d x %d partitions); events handled %.0f for %.0f unique valid (+%.0f conflicts and poison)",
		len(perKill), churn, floats(perKill), sum/float64(max(1, len(perKill))), worst, bound, window, partitions,
		handled, unique, handled-unique)
	p.expect("kill", int(churn/(6*time.Second)))
	if worst > bound {
		t.Fatalf("a kill made the group re-process %.0f events, more than the in-flight bound %.0f", worst, bound)
	}
}

func floats(fs []float64) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = fmt.Sprintf("%.0f", f)
	}
	return "[" + strings.Join(parts, " ") + "]"
}
