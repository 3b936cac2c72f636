package load

import (
	"context"
	"math"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// scrape reads what a worker's registry serves. The consumer's metrics carry
// a topic label (payments and grants): a histogram's series are summed, so
// the payments' batches still count.
func TestScrapeReadsTheWorkersExposition(t *testing.T) {
	reg := prometheus.NewRegistry()
	goroutines := prometheus.NewGauge(prometheus.GaugeOpts{Name: "go_goroutines"})
	heap := prometheus.NewGauge(prometheus.GaugeOpts{Name: "go_memstats_heap_inuse_bytes"})
	batch := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "billing_batch_size", Buckets: []float64{1, 64, 1024}}, []string{"topic"})
	tx := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "billing_ledger_transaction_seconds", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)})
	retries := prometheus.NewCounter(prometheus.CounterOpts{Name: "billing_ledger_deadlock_retries_total"})
	reg.MustRegister(goroutines, heap, batch, tx, retries)
	retries.Add(3)
	goroutines.Set(12)
	heap.Set(4096)
	for range 7 {
		batch.WithLabelValues("payment.succeeded").Observe(100)
	}
	batch.WithLabelValues("quota.grants")
	for _, s := range []float64{0.003, 0.003, 0.003, 0.1} {
		tx.Observe(s)
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()

	got, err := scrape(context.Background(), srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if got.goroutines != 12 || got.heapBytes != 4096 || got.batches != 7 || got.batchEvents != 700 || got.retries != 3 {
		t.Errorf("scraped %+v", got)
	}
	if n := len(got.tx); n != 15 || !math.IsInf(got.tx[n-1].UpperBound, +1) || got.tx[n-1].Count != 4 {
		t.Fatalf("transaction buckets %v: want 14 bounds and +Inf with all 4", got.tx)
	}
	if b := got.tx[3]; b.UpperBound != 0.004 || b.Count != 3 {
		t.Errorf("bucket %v, want le 0.004 with 3", b)
	}
}

func TestLedgerTx(t *testing.T) {
	inf := math.Inf(+1)
	tx := func(counts ...float64) []bucket {
		out := []bucket{}
		for i, bound := range []float64{0.001, 0.002, 0.004, inf} {
			out = append(out, bucket{UpperBound: bound, Count: counts[i]})
		}
		return out
	}
	tests := []struct {
		name string
		mem  []Memory
		want *LedgerTx
	}{
		{"two workers, from the first sample after the warm-up", []Memory{
			{Samples: []Sample{{AtS: 1, tx: tx(5, 5, 5, 5)}, {AtS: 2, tx: tx(5, 5, 5, 5)}, {AtS: 3, tx: tx(5, 15, 15, 15)}}},
			{Samples: []Sample{{AtS: 1}, {AtS: 2, tx: tx(0, 0, 0, 0)}, {AtS: 3, tx: tx(0, 0, 10, 10)}}},
		}, &LedgerTx{Count: 20, P50MS: 2, P99MS: 3.96}},
		{"one sample after the warm-up: nothing between", []Memory{
			{Samples: []Sample{{AtS: 1, tx: tx(5, 5, 5, 5)}, {AtS: 2, tx: tx(9, 9, 9, 9)}}},
		}, nil},
		{"/metrics never answered", []Memory{{Samples: []Sample{{AtS: 2}, {AtS: 3}}}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ledgerTx(tt.mem, 1.5)
			if (got == nil) != (tt.want == nil) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			if got != nil && (got.Count != tt.want.Count || math.Abs(got.P50MS-tt.want.P50MS) > 1e-9 || math.Abs(got.P99MS-tt.want.P99MS) > 1e-9) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// Each worker's counter at its highest sample (a failed scrape reads 0), summed.
func TestLedgerRetries(t *testing.T) {
	mem := []Memory{
		{Samples: []Sample{{retries: 1}, {retries: 4}, {}}},
		{Samples: []Sample{{retries: 2}}},
		{},
	}
	if got := ledgerRetries(mem); got != 6 {
		t.Errorf("ledgerRetries = %d, want 6", got)
	}
}

// The quantile of cumulative buckets, as histogram_quantile reads it.
func TestQuantile(t *testing.T) {
	inf := math.Inf(+1)
	of := func(bounds []float64, counts ...float64) []bucket {
		out := make([]bucket, len(bounds))
		for i := range bounds {
			out[i] = bucket{UpperBound: bounds[i], Count: counts[i]}
		}
		return out
	}
	ms := []float64{0.001, 0.002, 0.004, inf}
	tests := []struct {
		name string
		q    float64
		b    []bucket
		want float64
	}{
		{"in the first bucket: from 0", 0.5, of(ms, 10, 10, 10, 10), 0.0005},
		{"in a middle bucket: from the bound below", 0.5, of(ms, 0, 10, 10, 10), 0.0015},
		{"at a bucket's top", 0.5, of(ms, 5, 10, 10, 10), 0.001},
		{"past the observations below", 0.99, of(ms, 5, 5, 15, 15), 0.00397},
		{"in +Inf: the highest finite bound", 0.5, of(ms, 1, 1, 1, 10), 0.004},
		{"a first bound at or below 0: that bound", 0.1, of([]float64{-1, 0, 1, inf}, 5, 5, 10, 10), -1},
		{"no observations", 0.5, of(ms, 0, 0, 0, 0), math.NaN()},
		{"only +Inf", 0.5, of([]float64{inf}, 3), math.NaN()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := quantile(tt.q, tt.b)
			if math.IsNaN(tt.want) != math.IsNaN(got) || (!math.IsNaN(got) && math.Abs(got-tt.want) > 1e-12) {
				t.Errorf("quantile(%v, %v) = %v, want %v", tt.q, tt.b, got, tt.want)
			}
		})
	}
}
