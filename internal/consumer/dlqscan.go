package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/dlq"
)

const (
	// scanPoll bounds one wait for a record of a tail being read.
	scanPoll = time.Second
	// scanStall fails a scan attempt whose partition delivers nothing for
	// this long while records below the end captured at its start remain
	// unread: an unreachable broker must not pass for a short partition.
	scanStall = 10 * time.Second
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
	stale bool // scan again before the next publish
}

func newDeadLettered() *deadLettered {
	return &deadLettered{ready: make(chan struct{})}
}

// set records a scan; a topic found absent is scanned again before each
// publish until it exists (it may have been created since, or a stale
// metadata cache said it did not exist).
func (d *deadLettered) set(offs map[int]map[int64]time.Time, absent bool) {
	d.mu.Lock()
	d.offs, d.stale = offs, absent
	d.mu.Unlock()
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

// recheck scans again when set or invalidate asked for it; other lanes'
// rechecks and holds wait for it.
func (d *deadLettered) recheck(ctx context.Context, s *dlqScan) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.stale || s == nil {
		return nil
	}
	began := time.Now()
	offs, st, err := s.run(ctx)
	if err != nil {
		return err
	}
	d.offs, d.stale = offs, st.absent
	if !st.absent {
		s.scanned(st, time.Since(began))
	}
	return nil
}

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
	// A reader's Close waits for its prefetch (up to MaxWait): close in the
	// background while the next tail is read, and await them all.
	var closing sync.WaitGroup
	defer closing.Wait()
	for _, tl := range tails {
		err := s.read(ctx, tl, &closing, func(m kafka.Message) {
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

// read calls keep for every record of tl, in offset order.
func (s *dlqScan) read(ctx context.Context, tl tail, closing *sync.WaitGroup, keep func(kafka.Message)) error {
	log := s.log.With(zap.Int("dlq_partition", tl.partition))
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:          s.cfg.Brokers,
		Topic:            s.cfg.DLQTopic,
		Partition:        tl.partition,
		Dialer:           s.cfg.Dialer,
		MinBytes:         1,
		MaxBytes:         s.cfg.MaxBytes,
		MaxWait:          s.cfg.MaxWait,
		ReadBatchTimeout: readBatchTimeout,
		ReadLagInterval:  -1,
		ErrorLogger: kafka.LoggerFunc(func(format string, args ...any) {
			log.Warn("dead-letter scan reader", zap.String("error", fmt.Sprintf(format, args...)))
		}),
	})
	defer closing.Go(func() {
		if err := r.Close(); err != nil {
			log.Warn("close dead-letter scan reader", zap.Error(err))
		}
	})
	if err := r.SetOffset(tl.from); err != nil {
		return fmt.Errorf("seek partition %d to %d: %w", tl.partition, tl.from, err)
	}
	next, progress := tl.from, time.Now()
	for next < tl.to {
		pctx, cancel := context.WithTimeout(ctx, scanPoll)
		m, err := r.FetchMessage(pctx)
		cancel()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			// Nothing arrived: the end may be a gap the reader skipped
			// (compaction, transaction markers), or the broker is away.
			if r.Offset() >= tl.to {
				return nil
			}
			if time.Since(progress) > scanStall {
				return fmt.Errorf("partition %d delivered nothing for %v at offset %d (end %d)", tl.partition, scanStall, next, tl.to)
			}
			continue
		default:
			return fmt.Errorf("read partition %d at offset %d: %w", tl.partition, next, err)
		}
		if m.Offset >= tl.to {
			return nil
		}
		next, progress = m.Offset+1, time.Now()
		keep(m)
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
		began := time.Now()
		found, st, err := g.scan.run(g.stop)
		if err == nil {
			g.seen.set(found, st.absent)
			close(g.seen.ready)
			if st.absent {
				g.scan.log.Warn("dead-letter topic does not exist (yet); scanned again before each publish until it does")
			} else {
				g.scan.scanned(st, time.Since(began))
			}
			return
		}
		if g.stop.Err() != nil {
			return
		}
		g.c.health.fail(key, fmt.Errorf("consumer: scan dead-letter topic %s: %w", g.c.cfg.DLQTopic, err))
		g.c.m.retries.WithLabelValues(retryScan).Inc()
		g.log.Warn("dead-letter topic scan failed, retrying", zap.Error(err))
		if !sleep(g.stop, bo.NextBackOff()) {
			return
		}
	}
}
