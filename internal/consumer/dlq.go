package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

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

// dlqLookups is the transport of the dead-letter scan's metadata and offset
// look-ups, one for the consumer's life.
type dlqLookups struct {
	rt        kafka.RoundTripper
	transport *kafka.Transport // ours to close, when the config gave none
}

func newDLQLookups(cfg Config) *dlqLookups {
	d := &dlqLookups{rt: cfg.Transport}
	if d.rt == nil {
		d.transport = &kafka.Transport{}
		if cfg.Dialer != nil { // the same identity and security as the readers
			d.transport.ClientID = cfg.Dialer.ClientID
			d.transport.TLS = cfg.Dialer.TLS
			d.transport.SASL = cfg.Dialer.SASLMechanism
		}
		d.rt = d.transport
	}
	return d
}

func (d *dlqLookups) close() {
	if d.transport != nil {
		d.transport.CloseIdleConnections()
	}
}

// txnWriters are a generation's transactional dead-letter writers: one per
// assigned partition, under that partition's own transactional ID, so that
// opening it fences every earlier owner of the partition (see the package
// doc). A writer is opened for each partition when the generation starts
// (which also aborts at once what a crashed owner left open), again after a
// failed write, and on demand.
type txnWriters struct {
	cfg   Config
	seq   atomic.Uint64 // writers opened so far: a writer's publishes need a scan begun after its opening
	slots map[int]*txnSlot
}

type txnSlot struct {
	mu sync.Mutex
	w  *txnWriter
}

// txnWriter is an open writer and its place in the opening order.
type txnWriter struct {
	*dlq.TxnWriter
	seq uint64
}

func newTxnWriters(cfg Config, parts []int) *txnWriters {
	t := &txnWriters{cfg: cfg, slots: make(map[int]*txnSlot, len(parts))}
	for _, p := range parts {
		t.slots[p] = &txnSlot{}
	}
	return t
}

// transactionalID names the writer of one consumed partition: the same in
// every member of the group, whichever owns the partition.
func transactionalID(cfg Config, partition int) string {
	return fmt.Sprintf("%s/%s/%d", cfg.Group, cfg.Topic, partition)
}

// get returns partition's open writer, opening it if there is none.
func (t *txnWriters) get(ctx context.Context, partition int) (*txnWriter, error) {
	s := t.slots[partition]
	if s == nil {
		return nil, fmt.Errorf("consumer: partition %d is not assigned to this generation", partition)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w != nil {
		return s.w, nil
	}
	// Bounded, so that a broker that never answers (or keeps answering with
	// a retriable error) shows in Ready rather than hanging the caller.
	ctx, cancel := context.WithTimeout(ctx, t.cfg.DLQTxnTimeout)
	defer cancel()
	w, err := dlq.OpenTxnWriter(ctx, dlq.TxnConfig{
		Brokers: t.cfg.Brokers, Opts: t.cfg.Franz, Topic: t.cfg.DLQTopic,
		ID: transactionalID(t.cfg, partition), Timeout: t.cfg.DLQTxnTimeout,
	})
	if err != nil {
		return nil, err
	}
	s.w = &txnWriter{TxnWriter: w, seq: t.seq.Add(1)}
	return s.w, nil
}

// forPartitions returns the writers of partitions, opening those missing,
// and the highest opening sequence among them.
func (t *txnWriters) forPartitions(ctx context.Context, partitions []int) (map[int]*txnWriter, uint64, error) {
	ws := make(map[int]*txnWriter)
	var need uint64
	for _, id := range partitions {
		if ws[id] != nil {
			continue
		}
		w, err := t.get(ctx, id)
		if err != nil {
			return nil, 0, err
		}
		ws[id], need = w, max(need, w.seq)
	}
	return ws, need, nil
}

// openAll opens a writer for every partition, a few at a time.
func (t *txnWriters) openAll(ctx context.Context) error {
	var eg errgroup.Group
	eg.SetLimit(4)
	for id := range t.slots {
		eg.Go(func() error {
			_, err := t.get(ctx, id)
			return err
		})
	}
	return eg.Wait()
}

// drop closes w and forgets it, unless it was replaced already.
func (t *txnWriters) drop(partition int, w *txnWriter) {
	s := t.slots[partition]
	s.mu.Lock()
	if s.w == w {
		s.w = nil
	}
	s.mu.Unlock()
	w.Close()
}

// closeAll closes every writer; a write still running fails.
func (t *txnWriters) closeAll() {
	for _, s := range t.slots {
		s.mu.Lock()
		if s.w != nil {
			s.w.Close()
			s.w = nil
		}
		s.mu.Unlock()
	}
}

// deadLetter publishes the records of ps and marks their messages done. A
// failed publish is retried with backoff, for as long as it takes: the lane,
// and the offsets behind it, wait. It reports false when it gave up because
// the generation stopped or is over (the messages stay uncommitted).
//
// Each partition's records are written in a transaction of the partition's
// writer, and only after a scan of the dead-letter topic begun once that
// writer was open: the scan shows every record an earlier owner committed,
// and the opening fenced whatever that owner had not committed yet. Messages
// the scan shows are only marked done. A failed write may have committed all
// the same (a lost answer): unless the generation turns out to be over, its
// writer is replaced, which aborts it if it did not, and the next scan shows
// it if it did. After a publish the partition
// is committed at once rather than at the next tick.
func (g *generation[T]) deadLetter(l *lane[T], ps []pending[T]) bool {
	select {
	case <-g.seen.ready:
	case <-g.stop.Done():
		return false
	}
	key := l.key + "/dlq"
	retry := false // a publish of this call failed
	for {
		ws, need, err := g.writers.forPartitions(g.stop, pendingPartitions(ps))
		if err == nil {
			err = g.seen.recheck(g.stop, g.scan, &g.writers.seq, need)
		}
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
			ps, err = g.publish(ps, ws)
			if len(ps) == 0 {
				g.c.health.ok(key)
				g.commitSoon()
				return true
			}
			g.seen.invalidate()
			retry = true
			// Before replacing the writer, which would fence whoever owns
			// the partition now: a member that woke up from a pause learns
			// here that it does not.
			if g.generationOver(ps[0].e.part, "dead-letter write failed and the generation is over; not dead-lettering") {
				g.c.health.ok(key)
				return false
			}
			err = fmt.Errorf("consumer: publish to %s: %w", g.c.cfg.DLQTopic, err)
			g.c.m.retries.WithLabelValues(retryDLQ).Inc()
		} else {
			if g.stop.Err() != nil {
				g.c.health.ok(key)
				return false
			}
			err = fmt.Errorf("consumer: prepare dead-letter topic %s: %w", g.c.cfg.DLQTopic, err)
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

// pendingPartitions returns the partitions of ps, each once.
func pendingPartitions[T any](ps []pending[T]) []int {
	var ids []int
	for _, p := range ps {
		if !slices.Contains(ids, p.e.part.id) {
			ids = append(ids, p.e.part.id)
		}
	}
	return ids
}

// publish writes the records of ps, one transaction per partition, marks
// the messages of those committed done, and returns the others (reusing ps)
// with the errors. A writer whose write failed is replaced before the next.
func (g *generation[T]) publish(ps []pending[T], ws map[int]*txnWriter) ([]pending[T], error) {
	failed := make(map[int]bool)
	var errs []error
	for _, id := range pendingPartitions(ps) {
		var msgs []kafka.Message
		for _, p := range ps {
			if p.e.part.id == id {
				msgs = append(msgs, dlq.FromFailure(p.e.msg, g.c.cfg.Group, p.class, p.cause, p.attempts, p.first, p.last).KafkaMessage())
			}
		}
		if err := ws[id].Write(g.work, msgs); err != nil {
			failed[id] = true
			errs = append(errs, fmt.Errorf("partition %d: %w", id, err))
			g.writers.drop(id, ws[id])
		}
	}
	left := ps[:0]
	for _, p := range ps {
		if failed[p.e.part.id] {
			left = append(left, p)
			continue
		}
		p.e.part.done(p.e.msg.Offset)
		g.c.m.dlqPublished.WithLabelValues(string(p.class)).Inc()
		g.log.Warn("message dead-lettered", zap.Int("partition", p.e.msg.Partition), zap.Int64("offset", p.e.msg.Offset),
			zap.String("class", string(p.class)), zap.Int("attempt", p.attempts), zap.Error(p.cause))
	}
	clear(ps[len(left):])
	return left, errors.Join(errs...)
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
// is over. Younger messages skip the check (no round trip on the common
// path). This only saves a futile publish: the new owner's writer fences
// ours whichever way the check goes.
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
	return g.generationOver(oldest.e.part, "generation over while messages waited; not dead-lettering them")
}

// generationOver commits part's position synchronously and reports whether
// the coordinator refused it as coming from a generation that is over; then
// it logs why with msg. Anything else (the coordinator unreachable) says
// nothing about membership and reports false.
func (g *generation[T]) generationOver(part *partition, msg string) bool {
	pos, ok, _ := part.position()
	if !ok {
		return false
	}
	err := g.kg.CommitOffsets(map[string]map[int]int64{g.c.cfg.Topic: {part.id: pos}})
	switch {
	case err == nil:
		return false
	case errors.Is(err, kafka.IllegalGeneration), errors.Is(err, kafka.UnknownMemberId),
		errors.Is(err, kafka.RebalanceInProgress), errors.Is(err, kafka.FencedInstanceID):
		g.c.m.dlqFenced.Inc()
		g.log.Warn(msg, zap.Int("partition", part.id), zap.Int64("position", pos), zap.Error(err))
		return true
	}
	return false
}
