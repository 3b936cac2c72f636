package app

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotaflow/billing/internal/consumer"
	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/idgen"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/outbox"
)

// workerMetrics holds every part's metrics, registered on one registry.
type workerMetrics struct {
	app      *Metrics
	consumer *consumer.Metrics
	deduct   *deduct.Metrics
	ledger   *ledger.Metrics
	lock     *lock.Metrics
	idgen    *idgen.Metrics
	outbox   *outbox.Metrics
}

func registerAll(reg prometheus.Registerer) (*workerMetrics, error) {
	var m workerMetrics
	var errs [7]error
	m.app, errs[0] = NewMetrics(reg)
	m.consumer, errs[1] = consumer.NewMetrics(reg)
	m.deduct, errs[2] = deduct.NewMetrics(reg)
	m.ledger, errs[3] = ledger.NewMetrics(reg)
	m.lock, errs[4] = lock.NewMetrics(reg)
	m.idgen, errs[5] = idgen.NewMetrics(reg)
	m.outbox, errs[6] = outbox.NewMetrics(reg)
	return &m, errors.Join(errs[:]...)
}
