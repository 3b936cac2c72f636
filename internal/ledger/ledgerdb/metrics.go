package ledgerdb

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotaflow/billing/internal/metrics"
)

// Metrics of the ledger store.
type Metrics struct {
	deadlockRetries   prometheus.Counter
	txSeconds         prometheus.Histogram
	commitWaitSeconds prometheus.Histogram
}

// NewMetrics creates the collectors and registers them with reg, unless reg is nil.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		deadlockRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "billing_ledger_deadlock_retries_total",
			Help: "Ledger transactions tried again after a MySQL deadlock or lock wait timeout.",
		}),
		txSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "billing_ledger_transaction_seconds",
			Help:    "Duration of one ledger transaction attempt.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		commitWaitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "billing_ledger_commit_wait_seconds",
			Help:    "Time a batch waited before its transaction could write its rows (Options.MaxRowsInFlight).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
	}
	if err := metrics.Register(reg, m.deadlockRetries, m.txSeconds, m.commitWaitSeconds); err != nil {
		return nil, fmt.Errorf("ledger: register metrics: %w", err)
	}
	return m, nil
}
