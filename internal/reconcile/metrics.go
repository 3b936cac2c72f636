package reconcile

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotaflow/billing/internal/metrics"
)

// Metrics of the reconciler. No label carries a merchant id.
type Metrics struct {
	findings      *prometheus.CounterVec // by kind
	repairs       *prometheus.CounterVec // by result: repaired, hydrated, aborted
	runs          *prometheus.CounterVec // by status
	duration      prometheus.Histogram
	ledgerSeconds prometheus.Histogram // per page
	busy          prometheus.Counter
	lastDrift     prometheus.Gauge
	lastRun       prometheus.Gauge
}

// NewMetrics builds the reconciler's collectors and registers them with reg,
// which may be nil.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	ns, sub := metrics.Namespace, "reconcile"
	m := &Metrics{
		findings: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "findings_total",
			Help: "Findings, by kind."}, []string{"kind"}),
		repairs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "repairs_total",
			Help: "Redis repairs attempted, by result (repaired, hydrated, aborted)."}, []string{"result"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "runs_total",
			Help: "Runs, by status (clean, drift, repaired, failed)."}, []string{"status"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "run_duration_seconds",
			Help: "Duration of a whole run.", Buckets: prometheus.ExponentialBuckets(0.05, 2, 14)}),
		ledgerSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "ledger_page_seconds",
			Help: "Duration of the ledger audit of one page of merchants.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		busy: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "busy_skips_total",
			Help: "Merchants skipped because a worker held their lock (after the end-of-run retry)."}),
		lastDrift: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "last_run_abs_drift",
			Help: "Sum of absolute Redis drift found by the last run."}),
		lastRun: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "last_run_timestamp_seconds",
			Help: "Unix time the last run finished."}),
	}
	for _, k := range []Kind{KindRedisHigh, KindRedisLow, KindMissingKey, KindOrphanPending, KindStalePending,
		KindNegativeBalance, KindLedgerMismatch, KindMalformed, KindGrantsMismatch} {
		m.findings.WithLabelValues(string(k))
	}
	// Born at 0, so increase() sees a process's first failed run (alerts).
	for _, st := range []Status{StatusClean, StatusDrift, StatusRepaired, StatusFailed} {
		m.runs.WithLabelValues(string(st))
	}
	err := metrics.Register(reg, m.findings, m.repairs, m.runs, m.duration, m.ledgerSeconds, m.busy, m.lastDrift, m.lastRun)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Metrics) observe(r *Report) {
	for _, f := range r.Findings {
		m.findings.WithLabelValues(string(f.Kind)).Inc()
	}
	m.runs.WithLabelValues(string(r.Status)).Inc()
	m.duration.Observe(r.FinishedAt.Sub(r.StartedAt).Seconds())
	m.busy.Add(float64(r.Busy))
	m.lastDrift.Set(float64(r.AbsDrift))
	m.lastRun.Set(float64(r.FinishedAt.Unix()))
}
