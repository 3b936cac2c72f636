package app

import (
	"github.com/prometheus/client_golang/prometheus"

	appmetrics "github.com/quotaflow/billing/internal/metrics"
)

// Metrics are the worker's business metrics; the parts register their own.
type Metrics struct {
	events *prometheus.CounterVec
	grants *prometheus.CounterVec
	lag    prometheus.Histogram
}

// NewMetrics builds and registers the worker's metrics (reg may be nil).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: appmetrics.Namespace, Name: "events_total",
			Help: "Payment events by outcome: applied, duplicate, insufficient, unknown_merchant, conflict, refused, invalid.",
		}, []string{"outcome"}),
		grants: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: appmetrics.Namespace, Name: "grants_total",
			Help: "Grant commands of the grants topic by outcome: applied, duplicate, conflict, refused, invalid.",
		}, []string{"outcome"}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: appmetrics.Namespace, Name: "event_lag_seconds",
			Help:    "End-to-end lag from the event's occurred_at to its ledger commit.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
	}
	return m, appmetrics.Register(reg, m.events, m.grants, m.lag)
}
