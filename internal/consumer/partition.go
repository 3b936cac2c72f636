package consumer

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/logging"
)

// readBatchTimeout bounds each read within a fetch response. kafka-go's 10s
// default is also how long closing a reader can take mid-response.
const readBatchTimeout = 2 * time.Second

// partition is one assigned partition within a generation: its reader, its
// window of in-flight offsets (the backpressure: a full window pauses its
// fetch) and what was committed.
type partition struct {
	id        int
	reader    *kafka.Reader
	metrics   partitionMetrics
	hwm       atomic.Int64 // high watermark seen on the last fetched message
	committed int64        // last committed position, -1 if none; the committer's

	mu    sync.Mutex
	win   *window
	space chan struct{} // signalled when done messages leave the window
}

func newPartition(cfg Config, a kafka.PartitionAssignment, m *Metrics, log *zap.Logger) *partition {
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: cfg.Brokers, Topic: cfg.Topic, Partition: a.ID, Dialer: cfg.Dialer, MaxWait: cfg.MaxWait,
		ReadBatchTimeout: readBatchTimeout, QueueCapacity: min(cfg.MaxInFlightPerPartition, 512),
		ReadLagInterval: -1, // lag comes from the fetched high watermark
		ErrorLogger:     logging.Kafka(log.With(zap.Int("partition", a.ID))),
	})
	_ = r.SetOffset(a.Offset) // FirstOffset without a commit; fails only on a closed reader
	return &partition{
		id: a.ID, reader: r, metrics: m.partition(a.ID), committed: max(a.Offset, -1),
		win: newWindow(cfg.MaxInFlightPerPartition, a.Offset), space: make(chan struct{}, 1),
	}
}

// admit waits for room in the window and records off.
func (p *partition) admit(ctx context.Context, off int64) error {
	for {
		p.mu.Lock()
		ok, err := p.win.admit(off)
		p.mu.Unlock()
		if ok || err != nil {
			return err
		}
		select {
		case <-p.space:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// done marks off done; the commit position may move past it.
func (p *partition) done(off int64) {
	p.mu.Lock()
	freed := p.win.markDone(off)
	p.mu.Unlock()
	if freed > 0 {
		select {
		case p.space <- struct{}{}:
		default:
		}
	}
}

// position returns the commit position, whether it is known, and how many
// messages are in flight.
func (p *partition) position() (int64, bool, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pos, ok := p.win.position()
	return pos, ok, p.win.len()
}

// updateLag sets the lag gauge: high watermark minus the committed offset,
// or minus the first fetched offset while nothing is committed. The
// committer's.
func (p *partition) updateLag() {
	base, ok := p.committed, true
	if base < 0 {
		base, ok, _ = p.position()
	}
	if hwm := p.hwm.Load(); ok && hwm > 0 {
		p.metrics.lag.Set(float64(max(hwm-base, 0)))
	}
}

// fetch reads the partition in order, admits each message to the window,
// decodes it and hands it to its lane, until the generation stops. Decode
// failures travel to the lane too, which dead-letters them in order.
func (g *generation[T]) fetch(p *partition) {
	log := g.log.With(zap.Int("partition", p.id))
	key := "fetch/" + strconv.Itoa(p.id)
	defer g.c.health.ok(key)
	failing := false
	for {
		msg, err := p.reader.FetchMessage(g.stop)
		if err != nil {
			if g.stop.Err() != nil {
				return
			}
			// No backoff of our own: the reader already backs off between its
			// fetches and queues each failure, so sleeping here would only
			// deliver stale errors slowly, long after the broker recovered.
			if !failing {
				log.Warn("fetch failing, the reader retries", zap.Error(err))
			}
			failing = true
			g.c.health.fail(key, fmt.Errorf("consumer: fetch partition %d: %w", p.id, err))
			g.c.m.retries.WithLabelValues(retryFetch).Inc()
			continue
		}
		if failing {
			failing = false
			g.c.health.ok(key)
			log.Info("fetch recovered")
		}
		p.metrics.consumed.Inc()
		p.hwm.Store(msg.HighWaterMark)
		if err := p.admit(g.stop, msg.Offset); err != nil {
			if g.stop.Err() != nil {
				return
			}
			log.Error("message skipped", zap.Int64("offset", msg.Offset), zap.Error(err))
			continue
		}
		e := envelope[T]{msg: msg, part: p, fetched: time.Now()}
		var route Route
		e.value, route, e.err = g.c.decode(msg)
		if e.err != nil {
			route = Route{Key: string(msg.Key)}
		}
		select {
		case g.lanes[route.lane(len(g.lanes))].in <- e:
		case <-g.stop.Done():
			return
		}
	}
}

// fnv32 is FNV-1a of a key.
func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}
