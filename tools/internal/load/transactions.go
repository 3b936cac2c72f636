package load

import (
	"math"
	"slices"
	"sort"

	"github.com/quotaflow/billing/internal/workerproc"
)

// LedgerTx is the workers' ledger transactions after a paced run's warm-up,
// from their billing_ledger_transaction_seconds. A row's created_at, where
// the latencies end, is stamped as its transaction begins; the row is
// visible at the transaction's COMMIT, this much later. (The histogram also
// times grants and expiries; a load run has none while it measures.)
type LedgerTx struct {
	Count int     `json:"count"` // attempts
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
}

// ledgerTx sums each worker's transactions from its first memory sample at
// or after fromS (seconds since the workers' start) to its last, and reads
// the quantiles as histogram_quantile does (linear within a bucket); nil
// when there were none.
func ledgerTx(mem []Memory, fromS float64) *LedgerTx {
	var sum []bucket
	for _, m := range mem {
		var first, last []bucket
		for _, s := range m.Samples {
			if s.tx == nil || s.AtS < fromS {
				continue
			}
			if first == nil {
				first = s.tx
			}
			last = s.tx
		}
		sum = addBuckets(sum, subBuckets(last, first))
	}
	if len(sum) == 0 || sum[len(sum)-1].Count == 0 {
		return nil
	}
	return &LedgerTx{Count: int(sum[len(sum)-1].Count), P50MS: 1000 * quantile(0.5, sum), P99MS: 1000 * quantile(0.99, sum)}
}

// ledgerRetries sums each worker's billing_ledger_deadlock_retries_total at
// its highest sample (a counter; a sample whose scrape failed reads 0).
func ledgerRetries(mem []Memory) int64 {
	var sum float64
	for _, m := range mem {
		var most float64
		for _, s := range m.Samples {
			most = max(most, s.retries)
		}
		sum += most
	}
	return int64(sum)
}

// bucket is one bucket of a classic histogram.
type bucket = workerproc.Bucket

// quantile is the q-quantile (0..1) of cumulative buckets (ascending bounds,
// +Inf last) as PromQL's histogram_quantile reads it: linear within the bucket
// the rank falls in, from the bound below it (0 below the first); the highest
// finite bound when the rank falls in +Inf; NaN without observations.
func quantile(q float64, b []bucket) float64 {
	if len(b) < 2 || b[len(b)-1].Count == 0 {
		return math.NaN()
	}
	rank := q * b[len(b)-1].Count
	i := sort.Search(len(b)-1, func(i int) bool { return b[i].Count >= rank })
	switch {
	case i == len(b)-1:
		return b[i-1].UpperBound
	case i == 0 && b[0].UpperBound <= 0:
		return b[0].UpperBound
	}
	start, count := 0.0, b[i].Count
	if i > 0 {
		start, count, rank = b[i-1].UpperBound, count-b[i-1].Count, rank-b[i-1].Count
	}
	return start + (b[i].UpperBound-start)*(rank/count)
}

// addBuckets adds b's counts to a's (one binary: the same bounds); a nil a is b.
func addBuckets(a, b []bucket) []bucket {
	if a == nil {
		return slices.Clone(b)
	}
	for i := range min(len(a), len(b)) {
		a[i].Count += b[i].Count
	}
	return a
}

// subBuckets is after's counts less before's (nil before: after's).
func subBuckets(after, before []bucket) []bucket {
	out := slices.Clone(after)
	for i := range min(len(out), len(before)) {
		out[i].Count -= before[i].Count
	}
	return out
}
