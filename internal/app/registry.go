package app

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotaflow/billing/internal/adminapi"
	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/consumer"
	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/idgen"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/outbox"
	"github.com/quotaflow/billing/internal/writepath"
)

// workerMetrics holds every part's metrics, registered on one registry.
type workerMetrics struct {
	app      *Metrics
	consumer *consumer.Metrics // of the payment topic
	grants   *consumer.Metrics // of the grants topic
	path     writepath.Metrics
	admin    *adminapi.Metrics
	outbox   *outbox.Metrics
}

// registerAll registers every part's metrics on reg (nil: none). The two
// consumers' collectors carry their topic as a label.
func registerAll(reg prometheus.Registerer, k config.Kafka) (*workerMetrics, error) {
	var m workerMetrics
	var errs [9]error
	topic := func(t string) prometheus.Registerer {
		if reg == nil {
			return nil
		}
		return prometheus.WrapRegistererWith(prometheus.Labels{"topic": t}, reg)
	}
	m.app, errs[0] = NewMetrics(reg)
	m.consumer, errs[1] = consumer.NewMetrics(topic(k.Topic))
	m.grants, errs[6] = consumer.NewMetrics(topic(k.GrantsTopic))
	m.path.Deduct, errs[2] = deduct.NewMetrics(reg)
	m.path.Ledger, errs[3] = ledger.NewMetrics(reg)
	m.path.Lock, errs[4] = lock.NewMetrics(reg)
	m.path.IDGen, errs[5] = idgen.NewMetrics(reg)
	m.admin, errs[7] = adminapi.NewMetrics(reg)
	m.outbox, errs[8] = outbox.NewMetrics(reg)
	return &m, errors.Join(errs[:]...)
}
