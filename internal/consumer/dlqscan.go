package consumer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/dlq"
)

const (
	// scanPoll bounds one wait for a record of a tail being read.
	scanPoll = time.Second
	// scanStall fails a scan attempt whose partition delivers nothing for
	// this long, beyond the time an open transaction may hold records back,
	// while records below the end captured at its start remain unread: an
	// unreachable broker must not pass for a short partition.
	scanStall = 10 * time.Second
	// txnAbortSweep is how late after its timeout a broker aborts a
	// transaction left open (Kafka's
	// transaction.abort.timed.out.transaction.cleanup.interval.ms default).
	txnAbortSweep = 10 * time.Second
)

// deadLettered is what the dead-letter topic already holds of a
// generation's partitions: per partition, the original offsets of the
// records this group wrote for the consumed topic, at or after the offset
// the generation resumes the partition from, with their original timestamps.
// It is usable once ready is closed.
type deadLettered struct {
	ready chan struct{}

	mu    sync.Mutex
	offs  map[int]map[int64]time.Time
	stale bool   // scan again before the next publish
	asOf  uint64 // how many dead-letter writers were open when the scan began
}

func newDeadLettered() *deadLettered {
	return &deadLettered{ready: make(chan struct{})}
}

// merge adds what a scan found to what earlier scans found: a record once
// committed stays so, and a later scan's window, moved on by newer records
// (and transaction markers), may no longer reach it.
func (d *deadLettered) merge(offs map[int]map[int64]time.Time) {
	if d.offs == nil {
		d.offs = make(map[int]map[int64]time.Time, len(offs))
	}
	for p, found := range offs {
		if d.offs[p] == nil {
			d.offs[p] = make(map[int64]time.Time, len(found))
		}
		maps.Copy(d.offs[p], found)
	}
}

// invalidate asks for a scan before the next publish: a publish reported
// failed may have landed all the same (a timeout, or an error after the
// append), and its retry must not write the record twice.
func (d *deadLettered) invalidate() {
	d.mu.Lock()
	d.stale = true
	d.mu.Unlock()
}

// holds reports whether the dead-letter topic holds m already: same
// partition, offset and timestamp (a topic recreated under the same name
// reuses offsets, not timestamps).
func (d *deadLettered) holds(m kafka.Message) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.offs[m.Partition][m.Offset]
	return ok && at.Equal(m.Time)
}

// recheck scans again when invalidate asked for it, or when the last
// scan began before the need-th dead-letter writer (counted by opened) was
// open: a writer may publish only what a scan begun after its opening, which
// fenced every earlier writer of its partition, did not find. Other lanes'
// rechecks and holds wait for it.
func (d *deadLettered) recheck(ctx context.Context, s *dlqScan, opened *atomic.Uint64, need uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s == nil || (!d.stale && d.asOf >= need) {
		return nil
	}
	began, asOf := time.Now(), opened.Load()
	offs, st, err := s.run(ctx)
	if err == nil && st.absent {
		err = errDLQAbsent
	}
	if err != nil {
		return err
	}
	d.merge(offs)
	d.stale, d.asOf = false, asOf
	s.scanned(st, time.Since(began))
	return nil
}

// errDLQAbsent is a scan that found no dead-letter topic: nothing can be
// dead-lettered until it exists (the writers do not create topics), and the
// metadata saying so may be a stale cache, so it is retried, not trusted.
var errDLQAbsent = errors.New("the topic does not exist (create it; nothing is dead-lettered until it does)")

// tail is the offsets [from, to) of a dead-letter partition to read.
type tail struct {
	partition int
	from, to  int64
}

// dlqScan reads the tail of every partition of the dead-letter topic with
// plain partition readers at explicit offsets: no group, nothing committed.
type dlqScan struct {
	cfg    Config
	rt     kafka.RoundTripper
	log    *zap.Logger
	starts map[int]int64 // assigned partition -> the offset it resumes from (0 if unknown)
}

// scanStats describes one successful scan.
type scanStats struct {
	read, found, foreign int  // records read, kept, and not dead-letter records at all
	absent               bool // the topic does not exist (as far as the metadata knows)
}

// run reads the tails once and returns what they hold of s.starts.
func (s *dlqScan) run(ctx context.Context) (map[int]map[int64]time.Time, scanStats, error) {
	var st scanStats
	found := make(map[int]map[int64]time.Time)
	tails, absent, err := s.tails(ctx)
	if err != nil {
		return nil, st, err
	}
	st.absent = absent
	for _, tl := range tails {
		err := s.read(ctx, tl, func(m kafka.Message) {
			st.read++
			rec, err := dlq.FromMessage(m)
			if err != nil {
				st.foreign++
				return
			}
			start, ours := s.starts[rec.OriginalPartition]
			if !ours || rec.OriginalTopic != s.cfg.Topic || rec.Group != s.cfg.Group || rec.OriginalOffset < start {
				return
			}
			if found[rec.OriginalPartition] == nil {
				found[rec.OriginalPartition] = make(map[int64]time.Time)
			}
			found[rec.OriginalPartition][rec.OriginalOffset] = rec.OriginalTime
			st.found++
		})
		if err != nil {
			return nil, st, err
		}
	}
	return found, st, nil
}

// tails returns the last DLQScanWindow offsets of each dead-letter
// partition, as of now, or that the topic does not exist.
func (s *dlqScan) tails(ctx context.Context) (_ []tail, absent bool, _ error) {
	client := &kafka.Client{Addr: kafka.TCP(s.cfg.Brokers...), Transport: s.rt}
	mctx, cancel := context.WithTimeout(ctx, s.cfg.GroupTimeout)
	defer cancel()
	meta, err := client.Metadata(mctx, &kafka.MetadataRequest{Topics: []string{s.cfg.DLQTopic}})
	if err != nil {
		return nil, false, fmt.Errorf("metadata: %w", err)
	}
	var reqs []kafka.OffsetRequest
	for _, t := range meta.Topics {
		if t.Name != s.cfg.DLQTopic {
			continue
		}
		if errors.Is(t.Error, kafka.UnknownTopicOrPartition) {
			return nil, true, nil
		}
		if t.Error != nil {
			return nil, false, fmt.Errorf("metadata: %w", t.Error)
		}
		for _, p := range t.Partitions {
			reqs = append(reqs, kafka.FirstOffsetOf(p.ID), kafka.LastOffsetOf(p.ID))
		}
	}
	if len(reqs) == 0 {
		return nil, false, fmt.Errorf("metadata: no partitions: %w", kafka.UnknownTopicOrPartition)
	}
	octx, cancel := context.WithTimeout(ctx, s.cfg.GroupTimeout)
	defer cancel()
	resp, err := client.ListOffsets(octx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{s.cfg.DLQTopic: reqs}})
	if err != nil {
		return nil, false, fmt.Errorf("list offsets: %w", err)
	}
	parts := resp.Topics[s.cfg.DLQTopic]
	if len(parts) != len(reqs)/2 {
		return nil, false, fmt.Errorf("list offsets: %d of %d partitions answered", len(parts), len(reqs)/2)
	}
	tails := make([]tail, 0, len(parts))
	for _, p := range parts {
		if p.Error != nil {
			return nil, false, fmt.Errorf("list offsets of partition %d: %w", p.Partition, p.Error)
		}
		from := max(p.FirstOffset, p.LastOffset-int64(s.cfg.DLQScanWindow))
		if from < p.LastOffset {
			tails = append(tails, tail{partition: p.Partition, from: from, to: p.LastOffset})
		}
	}
	return tails, false, nil
}

// read calls keep for every record of tl a read_committed consumer sees, in
// offset order.
func (s *dlqScan) read(ctx context.Context, tl tail, keep func(kafka.Message)) error {
	rc := dlq.ReadConfig{
		Brokers: s.cfg.Brokers, Opts: s.cfg.Franz, Topic: s.cfg.DLQTopic, MaxBytes: s.cfg.MaxBytes,
		PollWait: scanPoll, Stall: max(scanStall, s.cfg.DLQTxnTimeout+txnAbortSweep+scanStall),
	}
	err := dlq.ReadCommitted(ctx, rc, dlq.Range{Partition: tl.partition, From: tl.from, To: tl.to}, func(m kafka.Message) error {
		keep(m)
		return nil
	})
	if err != nil {
		return fmt.Errorf("partition %d: %w", tl.partition, err)
	}
	return nil
}

// scanned logs a scan that found the topic.
func (s *dlqScan) scanned(st scanStats, took time.Duration) {
	s.log.Info("dead-letter topic scanned", zap.Int("records", st.read), zap.Int("ours", st.found),
		zap.Int("not_records", st.foreign), zap.Duration("took", took))
}

// scanDLQ fills g.seen from the dead-letter topic's tail, retrying with
// backoff (Ready reports it) until it succeeds or the generation stops.
// Dead-letter publishes wait for it; handling does not.
func (g *generation[T]) scanDLQ() {
	const key = "dlq/scan"
	defer g.c.health.ok(key)
	bo := newBackoff(g.c.cfg)
	for {
		// Fence the partitions' previous owners first, aborting what they
		// left open, so that the scan shows everything they committed.
		err := g.writers.openAll(g.stop)
		if err != nil {
			err = fmt.Errorf("consumer: open dead-letter writers: %w", err)
		}
		if err == nil {
			g.seen.invalidate()
			if err = g.seen.recheck(g.stop, g.scan, &g.writers.seq, 0); err != nil {
				err = fmt.Errorf("consumer: scan dead-letter topic %s: %w", g.c.cfg.DLQTopic, err)
			}
		}
		if err == nil {
			close(g.seen.ready)
			return
		}
		if g.stop.Err() != nil {
			return
		}
		g.c.health.fail(key, err)
		g.c.m.retries.WithLabelValues(retryScan).Inc()
		g.log.Warn("dead-letter writers or scan failed, retrying", zap.Error(err))
		if !sleep(g.stop, bo.NextBackOff()) {
			return
		}
	}
}
