package outbox

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotaflow/billing/internal/metrics"
)

// Metrics of the relay.
type Metrics struct {
	unsent        prometheus.Gauge
	oldestSeconds prometheus.Gauge
	published     prometheus.Counter
	pruned        prometheus.Counter
	errors        *prometheus.CounterVec
	leader        prometheus.Gauge
}

// NewMetrics creates the collectors and registers them with reg, unless reg is nil.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m := &Metrics{
		unsent: gauge("billing_quota_outbox_unsent",
			"Balance events in quota_outbox not yet published (as the relay last counted, every prune interval)."),
		oldestSeconds: gauge("billing_quota_outbox_oldest_unsent_seconds", "Age of the oldest unpublished balance event (0 when none)."),
		published:     counter("billing_quota_events_published_total", "Balance events the broker acknowledged (a retried write counts again)."),
		pruned:        counter("billing_quota_outbox_pruned_total", "Published rows deleted from quota_outbox."),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "billing_quota_relay_errors_total",
			Help: "Failed relay steps, by step (publish, mysql, wake); each is retried (a failed wake is left to the poll)."}, []string{"step"}),
		leader: gauge("billing_quota_relay_leader", "1 while this process is the one relaying balance events."),
	}
	if err := metrics.Register(reg, m.unsent, m.oldestSeconds, m.published, m.pruned, m.errors, m.leader); err != nil {
		return nil, fmt.Errorf("outbox: register metrics: %w", err)
	}
	return m, nil
}
