package stepaside

import (
	"github.com/prometheus/client_golang/prometheus"

	appmetrics "github.com/quotaflow/billing/internal/metrics"
)

// Metrics say whether the worker stands aside and how often it did.
type Metrics struct {
	aside      prometheus.Gauge
	stepAsides prometheus.Counter
}

// NewMetrics builds the collectors and registers them with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		aside: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: appmetrics.Namespace, Name: "idgen_stepped_aside",
			Help: "1 while the worker stands aside from its consumer groups and the relay because its Snowflake generator refuses."}),
		stepAsides: prometheus.NewCounter(prometheus.CounterOpts{Namespace: appmetrics.Namespace, Name: "idgen_step_asides_total",
			Help: "Times the worker stepped aside after its Snowflake generator refused for longer than IDGEN_STEP_ASIDE_AFTER."}),
	}
	return m, appmetrics.Register(reg, m.aside, m.stepAsides)
}
