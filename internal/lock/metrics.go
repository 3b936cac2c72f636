package lock

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotaflow/billing/internal/metrics"
)

// Result and reason label values.
const (
	resultObtained    = "obtained"
	resultNotObtained = "not_obtained"
	resultError       = "error"

	modeTry  = "try"
	modeWait = "wait"

	reasonNotHeld = "not_held" // a token check found the key gone or someone else's
	reasonExpired = "expired"  // Redis could not be reached to renew before the TTL ran out
)

// Metrics are the lock's Prometheus collectors. Labels never carry a key or a
// merchant id.
type Metrics struct {
	obtain      *prometheus.CounterVec
	wait        *prometheus.HistogramVec
	lost        *prometheus.CounterVec
	renewErrors prometheus.Counter
}

// NewMetrics builds the collectors and registers them with reg. A nil reg
// leaves them unregistered (they still count).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		obtain: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "billing_lock_obtain_total",
			Help: "Lock acquisitions by mode (try: Obtain, wait: Wait) and result."}, []string{"mode", "result"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "billing_lock_wait_seconds",
			Help:    "Time spent in Wait until the lock was obtained or the wait gave up, by result.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"result"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "billing_lock_lost_total",
			Help: "Locks lost while held, by reason (not_held: deleted, expired or taken; expired: not renewable in time)."}, []string{"reason"}),
		renewErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "billing_lock_renew_errors_total",
			Help: "Transient errors of watchdog renewals (each is retried until the lock would expire)."}),
	}
	for _, mode := range []string{modeTry, modeWait} {
		for _, r := range []string{resultObtained, resultNotObtained, resultError} {
			m.obtain.WithLabelValues(mode, r)
		}
	}
	for _, r := range []string{reasonNotHeld, reasonExpired} {
		m.lost.WithLabelValues(r)
	}
	if err := metrics.Register(reg, m.obtain, m.wait, m.lost, m.renewErrors); err != nil {
		return nil, fmt.Errorf("lock: register metrics: %w", err)
	}
	return m, nil
}

func resultOf(err error) string {
	switch {
	case err == nil:
		return resultObtained
	case errors.Is(err, ErrNotObtained):
		return resultNotObtained
	default:
		return resultError
	}
}
