package worker

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotaflow/billing/internal/adminapi"
	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/consumer"
	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/idgen"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/lock"
	appmetrics "github.com/quotaflow/billing/internal/metrics"
	"github.com/quotaflow/billing/internal/outbox"
	"github.com/quotaflow/billing/internal/stepaside"
	"github.com/quotaflow/billing/internal/writepath"
)

// Metrics are the worker's business metrics; the parts register their own.
type Metrics struct {
	events  *prometheus.CounterVec
	grants  *prometheus.CounterVec
	refunds *prometheus.CounterVec
	pending *pendingRefunds // read when scraped, once New has given it the ledger
	lag     prometheus.Histogram
}

// NewMetrics builds and registers the worker's metrics (reg may be nil).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	outcomes := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: appmetrics.Namespace, Name: name, Help: help}, []string{"outcome"})
	}
	m := &Metrics{
		events:  outcomes("events_total", "Payment events by outcome: applied, duplicate, insufficient, unknown_merchant, conflict, refused, invalid."),
		grants:  outcomes("grants_total", "Grant commands of the grants topic by outcome: applied, duplicate, conflict, refused, invalid."),
		refunds: outcomes("refunds_total", "Refunds of the refunds topic by outcome: applied, pending, void, duplicate, conflict, refused, invalid."),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: appmetrics.Namespace, Name: "event_lag_seconds",
			Help:    "End-to-end lag from the event's occurred_at to its ledger commit.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
	}
	m.pending = newPendingRefunds()
	return m, appmetrics.Register(reg, m.events, m.grants, m.refunds, m.pending, m.lag)
}

// workerMetrics holds every part's metrics, registered on one registry.
type workerMetrics struct {
	handler  *Metrics          // of the handlers
	consumer *consumer.Metrics // of the payment topic
	grants   *consumer.Metrics // of the grants topic
	refunds  *consumer.Metrics // of the refunds topic
	path     writepath.Metrics
	admin    *adminapi.Metrics
	outbox   *outbox.Metrics
	aside    *stepaside.Metrics
}

// registerAll registers every part's metrics on reg. The consumers'
// collectors carry their topic as a label.
func registerAll(reg prometheus.Registerer, k config.Kafka) (*workerMetrics, error) {
	var m workerMetrics
	var errs [10]error
	topic := func(t string) prometheus.Registerer {
		return prometheus.WrapRegistererWith(prometheus.Labels{"topic": t}, reg)
	}
	m.handler, errs[0] = NewMetrics(reg)
	m.consumer, errs[1] = consumer.NewMetrics(topic(k.Topic))
	m.grants, errs[6] = consumer.NewMetrics(topic(k.GrantsTopic))
	m.refunds, errs[9] = consumer.NewMetrics(topic(k.RefundsTopic))
	m.path.Deduct, errs[2] = deduct.NewMetrics(reg)
	m.path.Ledger, errs[3] = ledgerdb.NewMetrics(reg)
	m.path.Lock, errs[4] = lock.NewMetrics(reg)
	m.path.IDGen, errs[5] = idgen.NewMetrics(reg)
	m.admin, errs[7] = adminapi.NewMetrics(reg)
	m.outbox, errs[8] = outbox.NewMetrics(reg)
	m.aside, errs[9] = stepaside.NewMetrics(reg)
	return &m, errors.Join(errs[:]...)
}
