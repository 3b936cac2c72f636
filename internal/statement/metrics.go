package statement

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotaflow/billing/internal/metrics"
)

// Metrics describe the last export that succeeded. An export runs as a
// CronJob, which has nothing to scrape: the program writes them as a
// textfile beside its output (prometheus.WriteToTextfile) for node-exporter's
// textfile collector, and logs them.
type Metrics struct {
	rows, merchants, duration, lastSuccess prometheus.Gauge
}

// NewMetrics builds the collectors and registers them with reg (nil: none).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		rows: prometheus.NewGauge(prometheus.GaugeOpts{Name: "billing_statement_rows",
			Help: "Ledger rows listed by the last statement export that succeeded."}),
		merchants: prometheus.NewGauge(prometheus.GaugeOpts{Name: "billing_statement_merchants",
			Help: "Merchants in the last statement export that succeeded."}),
		duration: prometheus.NewGauge(prometheus.GaugeOpts{Name: "billing_statement_duration_seconds",
			Help: "How long the last statement export that succeeded took, job lock included."}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: "billing_statement_last_success_timestamp_seconds",
			Help: "When the last statement export succeeded (Unix time)."}),
	}
	if err := metrics.Register(reg, m.rows, m.merchants, m.duration, m.lastSuccess); err != nil {
		return nil, fmt.Errorf("statement: register metrics: %w", err)
	}
	return m, nil
}

// Succeeded records an export that succeeded.
func (m *Metrics) Succeeded(s Summary) {
	m.rows.Set(float64(s.Trailer.Rows))
	m.merchants.Set(float64(s.Trailer.Merchants))
	m.duration.Set(s.Duration.Seconds())
	m.lastSuccess.SetToCurrentTime()
}
