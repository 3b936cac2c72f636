package consumer

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/metrics"
)

// Retry kinds, the label of billing_retries_total.
const (
	retryOutage = "outage" // the probe failed: a dependency is down, attempts are not counted
	retrySplit  = "split"  // a multi-item batch failed with healthy dependencies: items retried alone
	retryItem   = "item"   // an item failed alone and is retried (counted toward MaxAttempts)
	retryDLQ    = "dlq"    // a dead-letter publish failed and is retried
	retryFetch  = "fetch"  // a partition fetch failed and is retried
)

// Metrics are the consumer's Prometheus collectors. Labels carry partitions,
// classes and kinds, never a lane key.
type Metrics struct {
	consumed      *prometheus.CounterVec // {partition}
	dlqPublished  *prometheus.CounterVec // {class}
	retries       *prometheus.CounterVec // {kind}
	batchSize     prometheus.Histogram   // items per handler call
	batchDuration prometheus.Histogram   // one lane batch, retries included
	lag           *prometheus.GaugeVec   // {partition}
	inflight      *prometheus.GaugeVec   // {partition}
	commits       *prometheus.CounterVec // {result}
	generations   prometheus.Counter     // group generations joined
}

// NewMetrics builds the collectors and registers them with reg. A nil reg
// leaves them unregistered (they still count).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	counters := func(name, help, label string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
	}
	gauges := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"partition"})
	}
	histogram := func(name, help string, buckets ...float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	}
	m := &Metrics{
		consumed:     counters("billing_consumer_messages_total", "Messages fetched from the consumed topic, by partition.", "partition"),
		dlqPublished: counters("billing_dlq_published_total", "Messages published to the dead-letter topic, by error class.", "class"),
		retries: counters("billing_retries_total",
			"Retries by kind (outage: dependency down, not counted as attempts; split: batch retried item by item; item: an item retried alone; dlq: dead-letter publish; fetch: partition fetch).", "kind"),
		batchSize: histogram("billing_batch_size", "Items per lane batch handed to the handler.",
			1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
		batchDuration: histogram("billing_batch_duration_seconds",
			"Time to settle a lane batch (handled, dead-lettered or abandoned), retries included.",
			.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30),
		lag: gauges("billing_consumer_lag", "High watermark minus the committed offset, per partition owned by this member."),
		inflight: gauges("billing_inflight",
			"Messages fetched and not yet released by the commit position, per partition owned by this member."),
		commits: counters("billing_consumer_commits_total", "Offset commit requests by result (ok, error).", "result"),
		generations: prometheus.NewCounter(prometheus.CounterOpts{Name: "billing_consumer_generations_total",
			Help: "Consumer group generations this member took part in (each rebalance starts one)."}),
	}
	for _, c := range []dlq.Class{dlq.ClassInvalid, dlq.ClassConflict, dlq.ClassRefused, dlq.ClassExhausted} {
		m.dlqPublished.WithLabelValues(string(c))
	}
	for _, k := range []string{retryOutage, retrySplit, retryItem, retryDLQ, retryFetch} {
		m.retries.WithLabelValues(k)
	}
	m.commits.WithLabelValues("ok")
	m.commits.WithLabelValues("error")
	err := metrics.Register(reg, m.consumed, m.dlqPublished, m.retries, m.batchSize, m.batchDuration,
		m.lag, m.inflight, m.commits, m.generations)
	if err != nil {
		return nil, fmt.Errorf("consumer: register metrics: %w", err)
	}
	return m, nil
}

// partitionMetrics are one partition's children, looked up once per generation.
type partitionMetrics struct {
	consumed prometheus.Counter
	lag      prometheus.Gauge
	inflight prometheus.Gauge
}

func (m *Metrics) partition(id int) partitionMetrics {
	l := strconv.Itoa(id)
	return partitionMetrics{consumed: m.consumed.WithLabelValues(l), lag: m.lag.WithLabelValues(l), inflight: m.inflight.WithLabelValues(l)}
}

// forget drops the gauges of a partition this member no longer owns.
func (m *Metrics) forget(id int) {
	l := strconv.Itoa(id)
	m.lag.DeleteLabelValues(l)
	m.inflight.DeleteLabelValues(l)
}
