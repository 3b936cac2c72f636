package consumer

import (
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/dlq"
)

// pending is a message on its way to the dead-letter topic.
type pending[T any] struct {
	e           envelope[T]
	class       dlq.Class
	cause       error
	attempts    int
	first, last time.Time
}

// dlqWriter publishes dead-letter records synchronously, acknowledged by all
// in-sync replicas.
type dlqWriter struct {
	w         *kafka.Writer
	transport *kafka.Transport // ours to close, when the config gave none
}

func newDLQWriter(cfg Config) *dlqWriter {
	d := &dlqWriter{}
	rt := cfg.Transport
	if rt == nil {
		d.transport = &kafka.Transport{}
		if cfg.Dialer != nil { // the same identity and security as the readers
			d.transport.ClientID = cfg.Dialer.ClientID
			d.transport.TLS = cfg.Dialer.TLS
			d.transport.SASL = cfg.Dialer.SASLMechanism
		}
		rt = d.transport
	}
	d.w = &kafka.Writer{
		Addr:         kafka.TCP(cfg.Brokers...),
		Topic:        cfg.DLQTopic,
		Balancer:     &kafka.Hash{}, // keep a key's records together
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: time.Millisecond, // writes are synchronous: do not wait for company
		MaxAttempts:  3,                // then our own backoff takes over
		Transport:    rt,
	}
	return d
}

func (d *dlqWriter) close() error {
	err := d.w.Close()
	if d.transport != nil {
		d.transport.CloseIdleConnections()
	}
	return err
}

// deadLetter publishes the records of ps and marks their messages done. A
// failed publish is retried with backoff, for as long as it takes: the lane,
// and the offsets behind it, wait. It reports false when it gave up because
// the generation stopped (the messages stay uncommitted).
func (g *generation[T]) deadLetter(l *lane[T], ps []pending[T]) bool {
	msgs := make([]kafka.Message, len(ps))
	for i, p := range ps {
		msgs[i] = dlq.FromFailure(p.e.msg, g.c.cfg.Group, p.class, p.cause, p.attempts, p.first, p.last).KafkaMessage()
	}
	key := l.key + "/dlq"
	for {
		err := g.c.dlq.w.WriteMessages(g.work, msgs...)
		var werrs kafka.WriteErrors
		if err != nil && !errors.As(err, &werrs) {
			werrs = nil
		}
		left := ps[:0]
		leftMsgs := msgs[:0]
		for i, p := range ps {
			if err != nil && (werrs == nil || werrs[i] != nil) {
				left, leftMsgs = append(left, p), append(leftMsgs, msgs[i])
				continue
			}
			p.e.part.done(p.e.msg.Offset)
			g.c.m.dlqPublished.WithLabelValues(string(p.class)).Inc()
			g.log.Warn("message dead-lettered", zap.Int("partition", p.e.msg.Partition), zap.Int64("offset", p.e.msg.Offset),
				zap.String("class", string(p.class)), zap.Int("attempt", p.attempts), zap.Error(p.cause))
		}
		ps, msgs = left, leftMsgs
		if len(ps) == 0 {
			g.c.health.ok(key)
			return true
		}
		g.c.health.fail(key, fmt.Errorf("consumer: publish to %s: %w", g.c.cfg.DLQTopic, err))
		g.c.m.retries.WithLabelValues(retryDLQ).Inc()
		g.log.Warn("dead-letter publish failed, retrying", zap.Int("messages", len(ps)), zap.Error(err))
		if !sleep(g.stop, l.bo.NextBackOff()) {
			g.c.health.ok(key)
			return false
		}
	}
}
