package dlq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
)

// Broker is how this package reaches Kafka (dial.KafkaClients builds the
// dialer and transport with TLS and SASL).
type Broker struct {
	Addrs     []string
	Dialer    *kafka.Dialer      // readers; nil: a plain one
	Transport kafka.RoundTripper // writes and offset look-ups; nil: kafka.DefaultTransport
}

// Client reads a dead-letter topic without a consumer group or commits: each
// partition from its first offset to the high watermark taken at the start,
// so a growing topic still gives a finite, repeatable answer.
type Client struct {
	b Broker
	// pollWait bounds one wait for a message; a read that delivers nothing
	// for stall while its range is unread fails (not an empty partition).
	pollWait, stall time.Duration
}

// ErrNoBrokers means the Broker names no address.
var ErrNoBrokers = errors.New("dlq: no broker addresses")

// NewClient returns a Client for the brokers.
func NewClient(b Broker) (*Client, error) {
	if len(b.Addrs) == 0 {
		return nil, ErrNoBrokers
	}
	b.Transport = cmp.Or(b.Transport, kafka.DefaultTransport)
	return &Client{b: b, pollWait: time.Second, stall: 30 * time.Second}, nil
}

// Records returns every record of topic up to its high watermarks, copies
// included, in order, without resolution marks; a message that is not a
// record is an error.
func (c *Client) Records(ctx context.Context, topic string) ([]Record, error) {
	ranges, err := c.watermarks(ctx, topic)
	if err != nil {
		return nil, err
	}
	var out []Record
	err = c.scan(ctx, topic, ranges, func(m kafka.Message) error {
		if isMark(m) {
			return nil
		}
		rec, err := FromMessage(m)
		out = append(out, rec)
		return err
	})
	return out, err
}

// Messages returns every message of any topic up to its high watermarks,
// in order per partition (the demo reads the balance events with it).
func (c *Client) Messages(ctx context.Context, topic string) ([]kafka.Message, error) {
	ranges, err := c.watermarks(ctx, topic)
	if err != nil {
		return nil, err
	}
	var out []kafka.Message
	err = c.scan(ctx, topic, ranges, func(m kafka.Message) error {
		out = append(out, m)
		return nil
	})
	return out, err
}

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

// watermarks returns each partition's Range of topic as of now, in order.
func (c *Client) watermarks(ctx context.Context, topic string) ([]Range, error) {
	kc := &kafka.Client{Addr: kafka.TCP(c.b.Addrs...), Transport: c.b.Transport, Timeout: 10 * time.Second}
	meta, err := kc.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("dlq: metadata of %s: %w", topic, err)
	}
	var reqs []kafka.OffsetRequest
	for _, t := range meta.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return nil, fmt.Errorf("dlq: metadata of %s: %w", topic, t.Error)
		}
		for _, p := range t.Partitions {
			reqs = append(reqs, kafka.FirstOffsetOf(p.ID), kafka.LastOffsetOf(p.ID))
		}
	}
	if len(reqs) == 0 {
		return nil, fmt.Errorf("dlq: topic %s has no partitions: %w", topic, kafka.UnknownTopicOrPartition)
	}
	resp, err := kc.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		return nil, fmt.Errorf("dlq: offsets of %s: %w", topic, err)
	}
	var out []Range
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			return nil, fmt.Errorf("dlq: offsets of %s/%d: %w", topic, po.Partition, po.Error)
		}
		out = append(out, Range{Partition: po.Partition, From: po.FirstOffset, To: po.LastOffset})
	}
	if len(out) != len(reqs)/2 {
		return nil, fmt.Errorf("dlq: offsets of %s: %d of %d partitions answered", topic, len(out), len(reqs)/2)
	}
	slices.SortFunc(out, func(a, b Range) int { return a.Partition - b.Partition })
	return out, nil
}

// scan calls fn for every message of the ranges, in order; fn returning
// errStopScan ends it with nil.
func (c *Client) scan(ctx context.Context, topic string, ranges []Range, fn func(kafka.Message) error) error {
	var closing sync.WaitGroup // a reader's Close waits up to MaxWait: the next range need not
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
	var lastErr atomic.Value // the reader retries by itself; a stall names its last error
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: c.b.Addrs, Topic: topic, Partition: rg.Partition, Dialer: c.b.Dialer,
		MaxBytes: 4 << 20, MaxWait: 250 * time.Millisecond,
		ErrorLogger: kafka.LoggerFunc(func(format string, args ...any) { lastErr.Store(fmt.Sprintf(format, args...)) }),
	})
	defer closing.Go(func() { _ = r.Close() })
	if err := r.SetOffset(rg.From); err != nil {
		return fmt.Errorf("dlq: seek %s/%d to %d: %w", topic, rg.Partition, rg.From, err)
	}
	next, progress := rg.From, time.Now()
	for next < rg.To {
		pctx, cancel := context.WithTimeout(ctx, c.pollWait)
		m, err := r.ReadMessage(pctx)
		cancel()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			// Nothing arrived: a gap at the end (compaction) is skipped
			// without a message, so only the reader's own offset ends the range.
			if r.Offset() >= rg.To {
				return nil
			}
			if time.Since(progress) > c.stall {
				return fmt.Errorf("dlq: %s/%d delivered nothing for %s at offset %d (high watermark %d; last error: %v)",
					topic, rg.Partition, c.stall, next, rg.To, lastErr.Load())
			}
			continue
		default:
			return fmt.Errorf("dlq: read %s/%d at offset %d: %w", topic, rg.Partition, next, err)
		}
		if m.Offset >= rg.To {
			return nil
		}
		next, progress = m.Offset+1, time.Now()
		if err := fn(m); err != nil {
			return err
		}
	}
	return nil
}
