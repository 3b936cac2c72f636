package load

import (
	"math"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/promql"
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
	var sum promql.Buckets
	for _, m := range mem {
		var first, last promql.Buckets
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

func quantile(q float64, b promql.Buckets) float64 {
	v, _, _, _, _, _ := promql.BucketQuantile(q, slices.Clone(b)) // it sorts in place
	return v
}

// cumulative is a classic histogram's buckets as histogram_quantile reads
// them: cumulative counts by upper bound, +Inf (every observation) last.
func cumulative(h *dto.Histogram) promql.Buckets {
	out := make(promql.Buckets, 0, len(h.GetBucket())+1)
	for _, b := range h.GetBucket() {
		if !math.IsInf(b.GetUpperBound(), +1) {
			out = append(out, promql.Bucket{UpperBound: b.GetUpperBound(), Count: float64(b.GetCumulativeCount())})
		}
	}
	return append(out, promql.Bucket{UpperBound: math.Inf(+1), Count: float64(h.GetSampleCount())})
}

// addBuckets adds b's counts to a's (one binary: the same bounds); a nil a is b.
func addBuckets(a, b promql.Buckets) promql.Buckets {
	if a == nil {
		return slices.Clone(b)
	}
	for i := range min(len(a), len(b)) {
		a[i].Count += b[i].Count
	}
	return a
}

// subBuckets is after's counts less before's (nil before: after's).
func subBuckets(after, before promql.Buckets) promql.Buckets {
	out := slices.Clone(after)
	for i := range min(len(out), len(before)) {
		out[i].Count -= before[i].Count
	}
	return out
}
