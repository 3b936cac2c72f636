package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// soakGauges are the runtime gauges the soak watches on every worker.
var soakGauges = []struct {
	key   string
	label string
	scale float64
	unit  string
	slack float64 // absolute growth allowed on top of 50%, in scaled units
}{
	{"go_goroutines", "goroutines", 1, "", 40},
	{"go_memstats_heap_inuse_bytes", "heap in use", 1 << 20, "MiB", 24},
	{"process_resident_memory_bytes", "RSS", 1 << 20, "MiB", 48},
}

// Two worker processes consume a steady load for -soak (15s by default, e.g.
// -soak=10m for a real soak; -soak=0 skips it) while their goroutines, heap
// and resident memory are sampled from /metrics. The average of the last
// third of the samples may not exceed the first third's by more than half
// plus a fixed slack: what grows without bound fails. The invariants are
// checked at the end as everywhere else.
func TestSoak(t *testing.T) {
	t.Parallel()
	dur := *soakFlag
	if dur <= 0 {
		t.Skip("-soak=0")
	}
	p := newPlan(t)
	every := min(max(dur/30, time.Second), 20*time.Second)
	const rate = 150
	ctx, cancel := context.WithTimeout(context.Background(), dur+3*time.Minute)
	defer cancel()
	g := newRig(t, rigOptions{partitions: 4})
	cfg := mixedLoad("soak-")
	cfg.Merchants = 200
	tr := traffic(t, p.seed(), cfg, rate*int(dur/time.Second), 3)
	g.grantTraffic(ctx, tr.Merchants(), 1_000_000)
	procs := []*proc{g.startProc(1, nil), g.startProc(2, nil)}
	for _, p := range procs {
		if err := p.WaitHTTP(ctx); err != nil {
			t.Fatal(err)
		}
	}
	load := g.startLoad(ctx, tr.Messages, rate)

	start := time.Now()
	series := make([][]samples, len(procs)) // per worker, per sample
	var at []time.Duration
	tick := time.NewTicker(every)
	for load.running() {
		select {
		case <-tick.C:
		case <-load.done:
			continue
		}
		at = append(at, time.Since(start))
		for i, p := range procs {
			m, err := p.Scrape(ctx)
			if err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
			series[i] = append(series[i], m)
		}
	}
	tick.Stop()
	if err := load.wait(); err != nil {
		t.Fatal(err)
	}
	g.drain(ctx, 2*time.Minute)
	for _, p := range procs {
		p.Stop()
	}
	g.settle(ctx, newTruth(tr).produced)

	if len(at) < 6 {
		t.Fatalf("only %d samples in %v", len(at), dur)
	}
	t.Logf("soak of %v at %d events/s, %d samples every %v:\n%s", dur, rate, len(at), every, soakTable(procs, at, series))
	for i, p := range procs {
		for _, gauge := range soakGauges {
			first, last := thirds(series[i], gauge.key)
			first, last = first/gauge.scale, last/gauge.scale
			limit := first*1.5 + gauge.slack
			t.Logf("%s %s: first third %.1f%s, last third %.1f%s (limit %.1f)", p.name, gauge.label, first, gauge.unit, last, gauge.unit, limit)
			if last > limit {
				t.Errorf("%s %s grows: %.1f%s in the first third of the soak, %.1f%s in the last", p.name, gauge.label, first, gauge.unit, last, gauge.unit)
			}
		}
	}
}

// thirds averages a gauge over the first and the last third of the samples.
func thirds(s []samples, key string) (first, last float64) {
	n := max(1, len(s)/3)
	for i := range n {
		first += s[i][key]
		last += s[len(s)-1-i][key]
	}
	return first / float64(n), last / float64(n)
}

func soakTable(procs []*proc, at []time.Duration, series [][]samples) string {
	var b strings.Builder
	b.WriteString("      t")
	for _, p := range procs {
		fmt.Fprintf(&b, " | %-8s gor  heapMiB  rssMiB", p.name)
	}
	b.WriteString("\n")
	step := max(1, len(at)/20) // at most ~20 rows
	for j := 0; j < len(at); j += step {
		fmt.Fprintf(&b, "%6.0fs", at[j].Seconds())
		for i := range procs {
			m := series[i][j]
			fmt.Fprintf(&b, " | %12.0f %8.1f %7.1f", m["go_goroutines"],
				m["go_memstats_heap_inuse_bytes"]/(1<<20), m["process_resident_memory_bytes"]/(1<<20))
		}
		b.WriteString("\n")
	}
	return b.String()
}
