package dlq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
)

// Range is the offsets [From, To) of one partition.
type Range struct {
	Partition int   `json:"partition"`
	From      int64 `json:"from"`
	To        int64 `json:"to"`
}

// Len is the number of offsets in the range.
func (r Range) Len() int64 { return max(0, r.To-r.From) }

// errStopScan, returned by a scan callback, ends the scan early without error.
var errStopScan = errors.New("dlq: stop scan")

// Watermarks returns one Range per partition of topic, in partition order:
// from the first offset still in the log to the high watermark, both as of now.
func (c *Client) Watermarks(ctx context.Context, topic string) ([]Range, error) {
	kc := c.kafkaClient()
	meta, err := kc.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("dlq: metadata of %s: %w", topic, err)
	}
	var parts []int
	for _, t := range meta.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return nil, fmt.Errorf("dlq: metadata of %s: %w", topic, t.Error)
		}
		for _, p := range t.Partitions {
			parts = append(parts, p.ID)
		}
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("dlq: topic %s has no partitions: %w", topic, kafka.UnknownTopicOrPartition)
	}
	slices.Sort(parts)
	reqs := make([]kafka.OffsetRequest, 0, 2*len(parts))
	for _, p := range parts {
		reqs = append(reqs, kafka.FirstOffsetOf(p), kafka.LastOffsetOf(p))
	}
	resp, err := kc.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		return nil, fmt.Errorf("dlq: offsets of %s: %w", topic, err)
	}
	byPart := map[int]kafka.PartitionOffsets{}
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			return nil, fmt.Errorf("dlq: offsets of %s/%d: %w", topic, po.Partition, po.Error)
		}
		byPart[po.Partition] = po
	}
	out := make([]Range, 0, len(parts))
	for _, p := range parts {
		po, ok := byPart[p]
		if !ok {
			return nil, fmt.Errorf("dlq: offsets of %s/%d: missing from the response", topic, p)
		}
		out = append(out, Range{Partition: p, From: po.FirstOffset, To: po.LastOffset})
	}
	return out, nil
}

// Scan reads the ranges of topic one partition after the other, in the order
// given, and calls fn for every message, in offset order. It reads with plain
// partition readers at explicit offsets: no consumer group, nothing committed.
// fn returning errStopScan ends the scan with a nil error.
func (c *Client) Scan(ctx context.Context, topic string, ranges []Range, fn func(kafka.Message) error) error {
	// A reader's Close waits for its prefetch (up to MaxWait); closing in the
	// background lets the next partition start meanwhile. Scan awaits them all.
	var closing sync.WaitGroup
	defer closing.Wait()
	for _, rg := range ranges {
		if rg.Len() == 0 {
			continue
		}
		if err := c.scanRange(ctx, topic, rg, fn, &closing); err != nil {
			if errors.Is(err, errStopScan) {
				return nil
			}
			return err
		}
	}
	return nil
}

func (c *Client) scanRange(ctx context.Context, topic string, rg Range, fn func(kafka.Message) error, closing *sync.WaitGroup) error {
	log := c.log.With(zap.String("topic", topic), zap.Int("partition", rg.Partition))
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:   c.b.Addrs,
		Topic:     topic,
		Partition: rg.Partition,
		Dialer:    c.b.Dialer,
		MinBytes:  1,
		MaxBytes:  4 << 20,
		MaxWait:   250 * time.Millisecond, // also how long Close waits for a prefetch
		ErrorLogger: kafka.LoggerFunc(func(format string, args ...any) {
			log.Warn("dlq: reader", zap.String("error", fmt.Sprintf(format, args...)))
		}),
	})
	defer closing.Go(func() {
		if err := r.Close(); err != nil {
			log.Warn("dlq: close reader", zap.Error(err))
		}
	})
	if err := r.SetOffset(rg.From); err != nil {
		return fmt.Errorf("dlq: seek %s/%d to %d: %w", topic, rg.Partition, rg.From, err)
	}
	next, lastProgress := rg.From, time.Now()
	for next < rg.To {
		m, err := c.poll(ctx, r)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			// Nothing arrived. A gap at the end (transaction markers) is
			// skipped by the reader without a message; an unreachable broker
			// looks the same, so only the reader's own offset ends the range.
			if r.Offset() >= rg.To {
				return nil
			}
			if time.Since(lastProgress) > c.opts.Stall {
				return fmt.Errorf("dlq: %s/%d delivered nothing for %s at offset %d (high watermark %d)", topic, rg.Partition, c.opts.Stall, next, rg.To)
			}
			continue
		default:
			return fmt.Errorf("dlq: read %s/%d at offset %d: %w", topic, rg.Partition, next, err)
		}
		if m.Offset >= rg.To {
			return nil
		}
		next, lastProgress = m.Offset+1, time.Now()
		if err := fn(m); err != nil {
			return err
		}
	}
	return nil
}

func (c *Client) poll(ctx context.Context, r *kafka.Reader) (kafka.Message, error) {
	pctx, cancel := context.WithTimeout(ctx, c.opts.PollWait)
	defer cancel()
	return r.ReadMessage(pctx)
}
