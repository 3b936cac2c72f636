package worker

import (
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/logging"
	"github.com/quotaflow/billing/internal/outbox"
	"github.com/quotaflow/billing/internal/writepath"
)

// newRelay builds the balance-event relay of a worker: part of the worker
// rather than a program of its own, since it needs exactly the worker's
// MySQL and Kafka settings and is idle most of the time; one worker of the
// group relays at a time (outbox's lock), the others stand by and wake it
// through Redis.
func newRelay(cfg config.Config, svc *writepath.Services, m *outbox.Metrics, log *zap.Logger) (*outbox.Relay, *kafka.Writer, error) {
	w := &kafka.Writer{
		Addr: kafka.TCP(cfg.Kafka.Brokers...), Topic: cfg.QuotaEvents.Topic, Transport: svc.Kafka.Transport,
		Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll, MaxAttempts: 1, // the relay retries
		BatchTimeout: time.Millisecond, BatchSize: relayBatch, WriteTimeout: 10 * time.Second,
		ErrorLogger: logging.Kafka(log),
	}
	r, err := outbox.New(svc.SQL, w, log.With(zap.String("topic", cfg.QuotaEvents.Topic)), m,
		outbox.Config{BatchSize: relayBatch, Retention: cfg.QuotaEvents.Retention,
			Wakes: outbox.Wakes{Redis: svc.Redis, Channel: svc.Keys.OutboxWake(cfg.MySQL.Database())}})
	if err != nil {
		return nil, nil, err
	}
	return r, w, nil
}

// relayBatch is the rows of one publish.
const relayBatch = 500
