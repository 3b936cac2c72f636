package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quotaflow/billing/internal/scenario"
	"github.com/quotaflow/billing/tools/internal/bench"
)

// writeBenchTable writes a bench report for a person.
func writeBenchTable(w io.Writer, r *bench.Report) error {
	wl := r.Workload
	fmt.Fprintf(w, "workload: %d events, %d merchants, skew %s (busiest merchant %.1f%%), amounts %d..%d, quota %d/merchant, seed %d\n",
		wl.Events, wl.Merchants, wl.Skew, 100*wl.TopShare, wl.MinAmount, wl.MaxAmount, wl.Quota, wl.Seed)
	fmt.Fprintf(w, "callers: %d, lane batch: %d; host: %d CPUs, %s, MySQL %s, Redis %s\n\n",
		wl.Callers, wl.Batch, r.Host.CPUs, r.Host.Go, r.Host.MySQL, r.Host.Redis)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tevents\tevents/s\tvs rowlock\tp50\tp99\tp999\tdebits\trejected\tledger\tbalances\tredis\tnon-neg\t")
	for _, res := range r.Results {
		if res.Error != "" {
			fmt.Fprintf(tw, "%s\t%d\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t\n", res.Strategy, res.Events)
			continue
		}
		ratio := "-"
		if res.VsRowLock > 0 {
			ratio = fmt.Sprintf("%.2fx", res.VsRowLock)
		}
		c := res.Check
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t\n",
			res.Strategy, res.Events, res.EventsPerSec, ratio,
			dur(res.Latency.P50), dur(res.Latency.P99), dur(res.Latency.P999),
			c.Debits, c.Rejected, verdict(c.LedgerOK), verdict(c.BalancesOK), optVerdict(c.RedisOK), verdict(c.NonNegative))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, res := range r.Results {
		var notes []string
		for _, k := range slices.Sorted(maps.Keys(res.Counters)) {
			notes = append(notes, fmt.Sprintf("%s=%d", k, res.Counters[k]))
		}
		if len(notes) > 0 {
			fmt.Fprintf(w, "  %s: %s\n", res.Strategy, strings.Join(notes, " "))
		}
		fmt.Fprintf(w, "  %s: deadlocks %s\n", res.Strategy, deadlocks(res.Deadlocks))
		if res.Error != "" {
			fmt.Fprintf(w, "  %s FAILED: %s\n", res.Strategy, res.Error)
		}
		for _, p := range res.Check.Problems {
			fmt.Fprintf(w, "  %s check: %s\n", res.Strategy, p)
		}
	}
	return nil
}

// deadlocks says the server's deadlocks over a run for a person.
func deadlocks(d scenario.Deadlocks) string {
	return fmt.Sprintf("%d on the server, %.1f per 100,000 events (Innodb_deadlocks, server-wide: other sessions' deadlocks count too)", d.Server, d.Per100k)
}

func dur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%dµs", d.Microseconds())
}

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "FAIL"
}

func optVerdict(ok *bool) string {
	if ok == nil {
		return "n/a"
	}
	return verdict(*ok)
}
