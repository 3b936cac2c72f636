package workload

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// Defaults of ProduceOptions.
const (
	DefaultChunk    = 1000
	DefaultProgress = time.Second
)

// MessageWriter is the part of *kafka.Writer that Produce uses.
type MessageWriter interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// NewKafkaWriter returns a writer tuned for bulk production: the key
// (merchant id) picks the partition with kafka.Hash, so a merchant's events
// stay in order on one partition; every write waits for all in-sync replicas;
// batches of up to 1000 messages or 1 MiB leave after at most 5 ms, so a
// synchronous caller writing chunks of DefaultChunk is never held back by
// kafka-go's one-second default linger. transport may be nil (kafka-go's default).
func NewKafkaWriter(brokers []string, topic string, transport *kafka.Transport) *kafka.Writer {
	w := &kafka.Writer{
		Addr:                   kafka.TCP(brokers...),
		Topic:                  topic,
		Balancer:               &kafka.Hash{},
		RequiredAcks:           kafka.RequireAll,
		BatchSize:              1000,
		BatchBytes:             1 << 20,
		BatchTimeout:           5 * time.Millisecond,
		WriteTimeout:           30 * time.Second,
		MaxAttempts:            10,
		AllowAutoTopicCreation: true,
	}
	if transport != nil {
		w.Transport = transport
	}
	return w
}

// ProduceOptions bound and pace Produce.
type ProduceOptions struct {
	// Total is how many messages to write; 0 writes until ctx ends.
	Total int
	// Rate is messages per second; 0 writes as fast as the broker takes them.
	Rate float64
	// Chunk is the number of messages per WriteMessages call (default 1000,
	// fewer when Rate is low so that pacing stays smooth).
	Chunk int
	// Progress is how often OnProgress is called (default 1s).
	Progress time.Duration
	// OnProgress, if set, is called from Produce's goroutine with the running totals.
	OnProgress func(ProduceStats)
}

// ProduceStats is what Produce has written (acknowledged by the broker).
type ProduceStats struct {
	Summary Summary
	Elapsed time.Duration
}

// Rate is the acknowledged messages per second so far.
func (s ProduceStats) Rate() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Summary.Messages) / s.Elapsed.Seconds()
}

// Produce writes g's stream to w until opts.Total messages are acknowledged or
// ctx ends, and returns what was acknowledged. A chunk that fails is not
// counted (some of its messages may have reached the broker: the stream is
// at-least-once, as any producer without idempotence is). When ctx ends first
// the error is ctx.Err().
func Produce(ctx context.Context, w MessageWriter, g *Generator, opts ProduceOptions) (ProduceStats, error) {
	if opts.Total < 0 || opts.Rate < 0 {
		return ProduceStats{}, fmt.Errorf("workload: total %d and rate %v must not be negative", opts.Total, opts.Rate)
	}
	chunk := chunkSize(opts)
	progress := opts.Progress
	if progress <= 0 {
		progress = DefaultProgress
	}
	start := time.Now()
	lastReport := start
	var st ProduceStats
	batch := make([]kafka.Message, 0, chunk)
	pending := make([]Message, 0, chunk)
	for opts.Total == 0 || st.Summary.Messages < opts.Total {
		n := chunk
		if opts.Total > 0 {
			n = min(n, opts.Total-st.Summary.Messages)
		}
		if err := pace(ctx, start, st.Summary.Messages, opts.Rate); err != nil {
			st.Elapsed = time.Since(start)
			return st, err
		}
		batch, pending = batch[:0], pending[:0]
		for range n {
			m := g.Next()
			pending = append(pending, m)
			batch = append(batch, kafka.Message{Key: m.Key, Value: m.Value})
		}
		if err := w.WriteMessages(ctx, batch...); err != nil {
			st.Elapsed = time.Since(start)
			if ctx.Err() != nil {
				return st, ctx.Err()
			}
			return st, fmt.Errorf("workload: write %d messages after %d: %w", n, st.Summary.Messages, err)
		}
		for _, m := range pending {
			st.Summary.Add(m)
		}
		if now := time.Now(); opts.OnProgress != nil && now.Sub(lastReport) >= progress {
			lastReport = now
			st.Elapsed = now.Sub(start)
			opts.OnProgress(st)
		}
	}
	st.Elapsed = time.Since(start)
	return st, nil
}

func chunkSize(opts ProduceOptions) int {
	c := opts.Chunk
	if c <= 0 {
		c = DefaultChunk
	}
	if opts.Rate > 0 {
		c = min(c, max(1, int(opts.Rate/20))) // about 20 writes a second
	}
	return c
}

// pace waits until the sent-th message is due at rate messages per second.
func pace(ctx context.Context, start time.Time, sent int, rate float64) error {
	if rate <= 0 {
		return ctx.Err()
	}
	return sleepUntil(ctx, start.Add(time.Duration(float64(sent)/rate*float64(time.Second))))
}
