package consumer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/failure"
	"github.com/quotaflow/billing/internal/logging"
	"github.com/quotaflow/billing/internal/tracing"
)

// pending is a message on its way to the dead-letter topic.
type pending[T any] struct {
	e     envelope[T]
	class dlq.Class
	cause error
}

// toDLQ counts a permanent failure of e, which dead-letters it.
func toDLQ[T any](e envelope[T], cause error) pending[T] {
	e.fail()
	class := cmp.Or(dlq.Class(failure.ClassOf(cause)), dlq.ClassInvalid)
	return pending[T]{e: e, class: class, cause: cause}
}

// errDLQAbsent names the missing dead-letter topic: the writer never creates
// it, and nothing is dead-lettered (nor committed past) until it exists.
var errDLQAbsent = errors.New("the topic does not exist (create it; nothing is dead-lettered until it does)")

// newDLQWriter writes synchronously with acks from every in-sync replica,
// keyed by provenance: a message's copies share a partition, where
// compaction folds them. It makes one attempt per call: deadLetter retries.
func newDLQWriter(cfg Config, rt kafka.RoundTripper, log *zap.Logger) *kafka.Writer {
	return &kafka.Writer{
		Addr: kafka.TCP(cfg.Brokers...), Topic: cfg.DLQTopic, Transport: rt,
		Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll, MaxAttempts: 1,
		// Lanes writing at once share a request; a lone write waits this long.
		BatchTimeout: time.Millisecond, BatchSize: cfg.BatchSize * cfg.Lanes,
		WriteTimeout: cfg.GroupTimeout, ReadTimeout: cfg.GroupTimeout,
		ErrorLogger: logging.Kafka(log.With(zap.String("dlq_topic", cfg.DLQTopic))),
	}
}

// deadLetter publishes the records of ps and marks their messages done once
// the DLQ has them, then asks for a commit at once rather than at the next
// tick. A failed publish is retried with backoff, for as long as it takes:
// the lane, and the offsets behind it, wait. It reports false when it gave
// up because the generation stopped (the messages stay uncommitted, and their
// next owner dead-letters them again: a copy, if this write landed after all).
// Under a traced batch the write is a span of its own, and each record carries
// it as its traceparent, so a replay links back to this write.
func (g *generation[T]) deadLetter(ctx context.Context, l *lane[T], ps []pending[T]) bool {
	key := l.key + "/dlq"
	defer g.c.health.ok(key)
	ctx, span := g.startDLQ(ctx, len(ps))
	defer span.End()
	msgs := make([]kafka.Message, len(ps))
	for i, p := range ps {
		msgs[i] = dlq.FromFailure(p.e.msg, g.c.cfg.Group, p.class, p.cause, p.e.attempts, p.e.first, p.e.last).KafkaMessage()
		if span.IsRecording() {
			tracing.Inject(ctx, &msgs[i])
		}
	}
	for {
		err := g.c.dlqWriter.WriteMessages(ctx, msgs...)
		var failed kafka.WriteErrors
		if !errors.As(err, &failed) {
			failed = make(kafka.WriteErrors, len(ps)) // all or nothing
			for i := range failed {
				failed[i] = err
			}
		}
		left, lmsgs := ps[:0], msgs[:0]
		for i, p := range ps {
			if failed[i] != nil {
				left, lmsgs = append(left, p), append(lmsgs, msgs[i])
				continue
			}
			p.e.part.done(p.e.msg.Offset)
			g.c.m.dlqPublished.WithLabelValues(string(p.class)).Inc()
			g.log.Warn("message dead-lettered", logFields(&p.e,
				zap.String("class", string(p.class)), zap.Int("attempt", p.e.attempts), zap.Error(p.cause))...)
		}
		if len(left) < len(ps) {
			g.commitSoon()
		}
		if ps, msgs = left, lmsgs; len(ps) == 0 {
			return true
		}
		if g.stop.Err() != nil {
			return false
		}
		g.dlqFailing(key, err)
		g.c.m.retries.WithLabelValues(retryDLQ).Inc()
		g.log.Warn("dead-letter publish failed, retrying", zap.Int("messages", len(ps)), zap.Error(err))
		if !sleep(g.stop, l.bo.NextBackOff()) {
			return false
		}
	}
}

// checkDLQTopic reports in Ready, from the generation's start until it
// exists, that the dead-letter topic is missing: a misconfiguration shows
// before the first poison message needs the topic.
func (g *generation[T]) checkDLQTopic() {
	const key = "dlq/topic"
	defer g.c.health.ok(key)
	client := &kafka.Client{Addr: kafka.TCP(g.c.cfg.Brokers...), Transport: g.c.transport, Timeout: g.c.cfg.GroupTimeout}
	bo := newBackoff(g.c.cfg)
	for {
		meta, err := client.Metadata(g.stop, &kafka.MetadataRequest{Topics: []string{g.c.cfg.DLQTopic}})
		if err == nil {
			for _, t := range meta.Topics {
				err = t.Error
			}
		}
		if err == nil || g.stop.Err() != nil {
			return
		}
		g.dlqFailing(key, err)
		if !sleep(g.stop, bo.NextBackOff()) {
			return
		}
	}
}

// dlqFailing reports in Ready that key cannot reach the dead-letter topic.
func (g *generation[T]) dlqFailing(key string, err error) {
	if errors.Is(err, kafka.UnknownTopicOrPartition) {
		err = errDLQAbsent
	}
	g.c.health.fail(key, fmt.Errorf("consumer: dead-letter topic %s: %w", g.c.cfg.DLQTopic, err))
}
