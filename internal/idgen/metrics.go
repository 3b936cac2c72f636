package idgen

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts what the generator and the lease do. No label carries an ID
// or a merchant.
type Metrics struct {
	issued          prometheus.Counter
	backwardWaited  prometheus.Counter
	backwardRefused prometheus.Counter
	exhaustionWaits prometheus.Counter
	leaseRefusals   prometheus.Counter
	renewError      prometheus.Counter
	renewLost       prometheus.Counter
	leaseAcquired   prometheus.Counter
}

// NewMetrics builds the collectors and registers them with reg; with a nil
// reg they work but are not registered.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	backward := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "billing_idgen_clock_backward_total",
		Help: "Times the clock was found behind the newest issued ID, by action: waited (<= max backward wait) or refused.",
	}, []string{"action"})
	renew := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "billing_idgen_lease_renew_failures_total",
		Help: "Worker-lease renewals that failed, by reason: error (Redis unreachable, retried) or lost (key gone or not ours).",
	}, []string{"reason"})
	issued := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "billing_idgen_ids_issued_total",
		Help: "Snowflake IDs issued.",
	})
	exhaustion := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "billing_idgen_sequence_exhausted_waits_total",
		Help: "Waits for the next millisecond because its 4096 sequence numbers were used.",
	})
	refusals := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "billing_idgen_lease_refusals_total",
		Help: "ID requests refused because the worker lease was not valid.",
	})
	acquired := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "billing_idgen_lease_acquired_total",
		Help: "Worker leases acquired (at start and after a loss).",
	})
	m := &Metrics{
		issued:          issued,
		backwardWaited:  backward.WithLabelValues("waited"),
		backwardRefused: backward.WithLabelValues("refused"),
		exhaustionWaits: exhaustion,
		leaseRefusals:   refusals,
		renewError:      renew.WithLabelValues("error"),
		renewLost:       renew.WithLabelValues("lost"),
		leaseAcquired:   acquired,
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{issued, backward, exhaustion, refusals, renew, acquired} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("idgen: register metrics: %w", err)
	}
	return m, nil
}

// unregisteredMetrics is what a nil Options.Metrics means: counting still
// works (the hot path needs no nil checks), nobody scrapes it.
func unregisteredMetrics() *Metrics {
	m, _ := NewMetrics(nil) // cannot fail without a registerer
	return m
}
