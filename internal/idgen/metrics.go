package idgen

import (
	"github.com/prometheus/client_golang/prometheus"

	appmetrics "github.com/quotaflow/billing/internal/metrics"
)

// Metrics counts what the generator and the lease do.
type Metrics struct {
	issued, exhaustionWaits, leaseRefusals, leaseAcquired  prometheus.Counter
	backwardWaited, backwardRefused, renewError, renewLost prometheus.Counter
}

// NewMetrics builds the collectors and registers them with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: appmetrics.Namespace, Name: name, Help: help})
	}
	backward := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: appmetrics.Namespace, Name: "idgen_clock_backward_total",
		Help: "Times the clock was found behind the newest issued ID, by action: waited (<= max backward wait) or refused."}, []string{"action"})
	renew := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: appmetrics.Namespace, Name: "idgen_lease_renew_failures_total",
		Help: "Worker-lease renewals that failed, by reason: error (Redis unreachable, retried) or lost (key gone or not ours)."}, []string{"reason"})
	m := &Metrics{
		issued:          counter("idgen_ids_issued_total", "Snowflake IDs issued."),
		exhaustionWaits: counter("idgen_sequence_exhausted_waits_total", "Waits for the next millisecond because its 4096 sequence numbers were used."),
		leaseRefusals:   counter("idgen_lease_refusals_total", "ID requests refused because the worker lease was not valid."),
		leaseAcquired:   counter("idgen_lease_acquired_total", "Worker leases acquired (at start and after a loss)."),
		backwardWaited:  backward.WithLabelValues("waited"),
		backwardRefused: backward.WithLabelValues("refused"),
		renewError:      renew.WithLabelValues("error"),
		renewLost:       renew.WithLabelValues("lost"),
	}
	return m, appmetrics.Register(reg, m.issued, backward, m.exhaustionWaits, m.leaseRefusals, renew, m.leaseAcquired)
}
