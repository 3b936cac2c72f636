package app

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotaflow/billing/internal/consumer"
	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/idgen"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/lock"
)

// workerMetrics holds every part's metrics, registered on one registry.
type workerMetrics struct {
	app      *Metrics
	consumer *consumer.Metrics
	deduct   *deduct.Metrics
	ledger   *ledger.Metrics
	lock     *lock.Metrics
	idgen    *idgen.Metrics
}

func registerAll(reg prometheus.Registerer) (*workerMetrics, error) {
	var m workerMetrics
	var err error
	if m.app, err = NewMetrics(reg); err != nil {
		return nil, err
	}
	if m.consumer, err = consumer.NewMetrics(reg); err != nil {
		return nil, err
	}
	if m.deduct, err = deduct.NewMetrics(reg); err != nil {
		return nil, err
	}
	if m.ledger, err = ledger.NewMetrics(reg); err != nil {
		return nil, err
	}
	if m.lock, err = lock.NewMetrics(reg); err != nil {
		return nil, err
	}
	if m.idgen, err = idgen.NewMetrics(reg); err != nil {
		return nil, err
	}
	return &m, nil
}

// RegisterWorkerMetrics registers every metric billing-worker exposes, for
// checks that dashboards and alerts name only real metrics.
func RegisterWorkerMetrics(reg prometheus.Registerer) error {
	_, err := registerAll(reg)
	return err
}
