package deduct

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotaflow/billing/internal/metrics"
)

// Metrics of the write path. No label carries a merchant id.
type Metrics struct {
	hydrations        prometheus.Counter
	rebalances        prometheus.Counter
	staleRehydrations *prometheus.CounterVec
	redos             *prometheus.CounterVec
	lockLost          prometheus.Counter
	fenced            *prometheus.CounterVec
	failedBatches     prometheus.Counter
	batchSeconds      prometheus.Histogram
	batchEvents       prometheus.Histogram
}

// NewMetrics creates the collectors and registers them with reg, unless reg is nil.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	vec := func(name, help, label string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
	}
	histogram := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	}
	m := &Metrics{
		hydrations: counter("billing_deduct_hydrations_total",
			"Quota hashes loaded into Redis from merchant_balance because they were missing."),
		rebalances: counter("billing_deduct_rebalances_total",
			"Rebalances of a merchant's quota shards from MySQL under all its shard locks (a shard that could not cover a payment, a missing shard, a resharding)."),
		staleRehydrations: vec("billing_deduct_stale_rehydrations_total",
			"Quota hashes dropped to be rebuilt from MySQL, by cause: over (MySQL refused a debit Redis allowed), under (MySQL covers a payment Redis rejected), unmatched (a pending deduction that no debit matches: a conflict, a refusal, or an event another holder recorded).", "cause"),
		redos: vec("billing_deduct_batch_redos_total",
			"Batches redone from the existing-events query, by reason (stale_cache, rebalance: a shard ran dry while MySQL covers the payment, duplicate, refused, expiry: MySQL's guard met a grant expiry that was due).", "reason"),
		lockLost: counter("billing_deduct_lock_lost_total", "Batches aborted because a merchant lock was lost."),
		fenced: vec("billing_deduct_fenced_total",
			"Script calls that wrote nothing because the merchant lock held another token or none (fencing), by script (deduct, hydrate, settle, drop).", "script"),
		failedBatches: counter("billing_deduct_batch_failures_total", "Batches that returned a transient error."),
		batchSeconds: histogram("billing_deduct_batch_seconds", "Duration of Apply for one batch, locks included.",
			prometheus.ExponentialBuckets(0.0005, 2, 16)),
		batchEvents: histogram("billing_deduct_batch_events", "Events per applied batch.", prometheus.ExponentialBuckets(1, 2, 12)),
	}
	for _, script := range []string{"deduct", "hydrate", "settle", "drop"} {
		m.fenced.WithLabelValues(script)
	}
	if err := metrics.Register(reg, m.hydrations, m.rebalances, m.staleRehydrations, m.redos,
		m.lockLost, m.fenced, m.failedBatches, m.batchSeconds, m.batchEvents); err != nil {
		return nil, fmt.Errorf("deduct: register metrics: %w", err)
	}
	return m, nil
}
