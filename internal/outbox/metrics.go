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
	m := &Metrics{
		unsent: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "billing_quota_outbox_unsent",
			Help: "Balance events in quota_outbox not yet published (as the relay last counted, every prune interval).",
		}),
		oldestSeconds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "billing_quota_outbox_oldest_unsent_seconds",
			Help: "Age of the oldest unpublished balance event (0 when none).",
		}),
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "billing_quota_events_published_total",
			Help: "Balance events the broker acknowledged (a retried write counts again).",
		}),
		pruned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "billing_quota_outbox_pruned_total",
			Help: "Published rows deleted from quota_outbox.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "billing_quota_relay_errors_total",
			Help: "Failed relay steps, by step (publish, mysql); each is retried.",
		}, []string{"step"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "billing_quota_relay_leader",
			Help: "1 while this process is the one relaying balance events.",
		}),
	}
	if err := metrics.Register(reg, m.unsent, m.oldestSeconds, m.published, m.pruned, m.errors, m.leader); err != nil {
		return nil, fmt.Errorf("outbox: register metrics: %w", err)
	}
	return m, nil
}
