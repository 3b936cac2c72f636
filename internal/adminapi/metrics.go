package adminapi

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	appmetrics "github.com/quotaflow/billing/internal/metrics"
)

// Metrics count the read API's requests by route and status code (never by
// merchant: that label would grow without bound).
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics builds and registers the API's metrics (reg may be nil).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: appmetrics.Namespace, Name: "admin_requests_total",
			Help: "Read API requests by route (its path pattern, or other) and HTTP status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: appmetrics.Namespace, Name: "admin_request_duration_seconds",
			Help:    "Read API request latency by route.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"route"}),
	}
	return m, appmetrics.Register(reg, m.requests, m.duration)
}

func (m *Metrics) observe(route string, code int, took time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(route).Observe(took.Seconds())
}
