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
	rt        kafka.RoundTripper // the writer's, also for the dead-letter scan's look-ups
	transport *kafka.Transport   // ours to close, when the config gave none
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
	d.rt = rt
	d.w = &kafka.Writer{
		Addr:         kafka.TCP(cfg.Brokers...),
		Topic:        cfg.DLQTopic,
		Balancer:     &kafka.Hash{}, // keep a key's records together
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: time.Millisecond, // writes are synchronous: do not wait for company
		// No retries of its own: a failed write may have landed, and only
		// deadLetter's retry scans the topic before writing again.
		MaxAttempts: 1,
		Transport:   rt,
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
//
// It first waits for the generation's scan of the dead-letter topic, and
// only marks done, without publishing, the messages a previous owner of
// their partition dead-lettered already. A failed publish may have landed
// all the same (a timeout, an error after the append): its retry scans the
// topic again first. After a publish it asks for a commit at once, so that a
// rebalance or crash seldom finds the dead-lettered offset uncommitted.
func (g *generation[T]) deadLetter(l *lane[T], ps []pending[T]) bool {
	select {
	case <-g.seen.ready:
	case <-g.stop.Done():
		return false
	}
	key := l.key + "/dlq"
	retry := false // a publish of this call failed
	for {
		err := g.seen.recheck(g.stop, g.scan)
		if err == nil {
			if ps = g.skipDeadLettered(ps, retry); len(ps) == 0 {
				g.c.health.ok(key)
				g.commitSoon()
				return true
			}
			if g.fencedOff(ps) {
				// Another member owns these partitions now and will dead-letter
				// the messages itself; ours stay uncommitted.
				g.c.health.ok(key)
				return false
			}
			ps, err = g.publish(ps)
			if len(ps) == 0 {
				g.c.health.ok(key)
				g.commitSoon()
				return true
			}
			g.seen.invalidate()
			retry = true
			err = fmt.Errorf("consumer: publish to %s: %w", g.c.cfg.DLQTopic, err)
			g.c.m.retries.WithLabelValues(retryDLQ).Inc()
		} else {
			if g.stop.Err() != nil {
				g.c.health.ok(key)
				return false
			}
			err = fmt.Errorf("consumer: scan dead-letter topic %s: %w", g.c.cfg.DLQTopic, err)
			g.c.m.retries.WithLabelValues(retryScan).Inc()
		}
		g.c.health.fail(key, err)
		g.log.Warn("dead-letter publish failed, retrying", zap.Int("messages", len(ps)), zap.Error(err))
		if !sleep(g.stop, l.bo.NextBackOff()) {
			g.c.health.ok(key)
			return false
		}
	}
}

// publish writes the records of ps once, marks the messages of those
// written done, and returns the others (reusing ps) with the error.
func (g *generation[T]) publish(ps []pending[T]) ([]pending[T], error) {
	msgs := make([]kafka.Message, len(ps))
	for i, p := range ps {
		msgs[i] = dlq.FromFailure(p.e.msg, g.c.cfg.Group, p.class, p.cause, p.attempts, p.first, p.last).KafkaMessage()
	}
	err := g.c.dlq.w.WriteMessages(g.work, msgs...)
	var werrs kafka.WriteErrors
	if err != nil && !errors.As(err, &werrs) {
		werrs = nil
	}
	left := ps[:0]
	for i, p := range ps {
		if err != nil && (werrs == nil || werrs[i] != nil) {
			left = append(left, p)
			continue
		}
		p.e.part.done(p.e.msg.Offset)
		g.c.m.dlqPublished.WithLabelValues(string(p.class)).Inc()
		g.log.Warn("message dead-lettered", zap.Int("partition", p.e.msg.Partition), zap.Int64("offset", p.e.msg.Offset),
			zap.String("class", string(p.class)), zap.Int("attempt", p.attempts), zap.Error(p.cause))
	}
	clear(ps[len(left):])
	return left, err
}

// skipDeadLettered marks done the messages of ps the dead-letter topic holds
// already, and returns the others (reusing ps). retry says whether this
// deadLetter call published before.
func (g *generation[T]) skipDeadLettered(ps []pending[T], retry bool) []pending[T] {
	msg := "already dead-lettered by a previous owner"
	if retry {
		msg = "already dead-lettered by a publish reported failed"
	}
	left := ps[:0]
	for _, p := range ps {
		if !g.seen.holds(p.e.msg) {
			left = append(left, p)
			continue
		}
		p.e.part.done(p.e.msg.Offset)
		g.c.m.dlqSkipped.Inc()
		g.log.Info(msg, zap.Int("partition", p.e.msg.Partition),
			zap.Int64("offset", p.e.msg.Offset), zap.String("class", string(p.class)), zap.Error(p.cause))
	}
	clear(ps[len(left):])
	return left
}

// fencedOff reports whether the coordinator has moved on from this generation.
// A member paused longer than its session (a GC pause, SIGSTOP) is replaced
// while it sleeps and wakes up still holding messages its partitions' new owner
// will dead-letter too. A pause long enough to lose the membership lasts a
// session timeout, so it makes every message fetched before it at least that
// old: such messages are published only after a synchronous commit of their
// partition's position, which the coordinator refuses from a generation that
// is over. Younger messages skip the check (no round trip on the common path).
func (g *generation[T]) fencedOff(ps []pending[T]) bool {
	oldest := ps[0]
	for _, p := range ps[1:] {
		if p.e.fetched.Before(oldest.e.fetched) {
			oldest = p
		}
	}
	if time.Since(oldest.e.fetched) < g.c.cfg.SessionTimeout {
		return false
	}
	pos, ok, _ := oldest.e.part.position()
	if !ok {
		return false
	}
	err := g.kg.CommitOffsets(map[string]map[int]int64{g.c.cfg.Topic: {oldest.e.part.id: pos}})
	switch {
	case err == nil:
		return false
	case errors.Is(err, kafka.IllegalGeneration), errors.Is(err, kafka.UnknownMemberId),
		errors.Is(err, kafka.RebalanceInProgress), errors.Is(err, kafka.FencedInstanceID):
		g.c.m.dlqFenced.Inc()
		g.log.Warn("generation over while messages waited; not dead-lettering them",
			zap.Int("partition", oldest.e.part.id), zap.Int64("offset", oldest.e.msg.Offset), zap.Error(err))
		return true
	}
	// Anything else (the coordinator unreachable) says nothing about membership.
	return false
}
