package bench

import (
	"math"
	"slices"
	"time"
)

// Latencies summarises per-event latencies (a batch's latency counts once for
// each of its events).
type Latencies struct {
	P50  time.Duration
	P99  time.Duration
	P999 time.Duration
	Max  time.Duration
}

// summarize sorts d in place and reads its percentiles.
func summarize(d []time.Duration) Latencies {
	if len(d) == 0 {
		return Latencies{}
	}
	slices.Sort(d)
	return Latencies{
		P50:  percentile(d, 0.50),
		P99:  percentile(d, 0.99),
		P999: percentile(d, 0.999),
		Max:  d[len(d)-1],
	}
}

// percentile is the nearest-rank percentile of sorted: the smallest value
// with at least p of the values at or below it.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}
