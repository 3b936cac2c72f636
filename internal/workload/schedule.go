package workload

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"time"

	"github.com/segmentio/kafka-go"
)

// ScheduleStats is what ProduceOnSchedule handed to the writer.
type ScheduleStats struct {
	Summary Summary
	// MaxLag is the longest a message waited past its due time before it was
	// handed to the writer: the producer's own delay, zero when it kept up.
	MaxLag time.Duration
	// Elapsed is from the schedule's start to the last hand-over.
	Elapsed time.Duration
}

// Writers are where ProduceOnSchedule writes: payments to Payments, refunds
// (of a stream with Config.Refunds > 0) to Refunds.
type Writers struct{ Payments, Refunds MessageWriter }

// ProduceOnSchedule writes total messages of g's stream (0: until ctx ends)
// to w on an absolute schedule: message k is due at its occurred_at, g.Config().Start + k*Step,
// and is handed over at that time (a late producer catches up at once, never
// stretching the schedule). Paced, each message's occurred_at is its produce
// time, so the ledger's created_at minus occurred_at is produce->ledger
// latency, the producer's lag included; its record timestamp
// (kafka.Message.Time, which the writer's completion still sees) is the same
// due time. With unpaced, every message is due at once and goes out in
// chunks as fast as g makes them (a preload). Within a hand-over the
// payments go before the refunds; an early refund is a hand-over ahead of
// its payment (EarlyLead). progress, if set, is called
// after every hand-over with the totals so far.
//
// With an asynchronous w (kafka.Writer.Async) what was acknowledged is the
// writer's completion's to count; a synchronous writer makes every chunk wait
// for the broker (the producer falls behind, then catches up), and the stats
// count only acknowledged chunks.
func ProduceOnSchedule(ctx context.Context, w Writers, g *Generator, total int, unpaced bool, progress func(ScheduleStats)) (ScheduleStats, error) {
	cfg := g.Config()
	if cfg.Refunds > 0 && w.Refunds == nil {
		return ScheduleStats{}, fmt.Errorf("workload: a stream with refunds needs a refunds writer")
	}
	start, step := cfg.Start, cfg.Step
	total = cmp.Or(total, math.MaxInt)
	var st ScheduleStats
	batch, rbatch := make([]kafka.Message, 0, chunk), make([]kafka.Message, 0, chunk)
	pending := make([]Message, 0, chunk)
	for sent := 0; sent < total; {
		now := time.Now()
		due := total
		if !unpaced {
			due = min(total, dueBy(start, step, now))
		}
		if due <= sent {
			// At least a tick between hand-overs: at 10,000/s one call per
			// message would cost more than the messages.
			next := start.Add(step * time.Duration(sent))
			if next.Before(now.Add(minTick)) {
				next = now.Add(minTick)
			}
			if err := sleepUntil(ctx, next); err != nil {
				return st, err
			}
			continue
		}
		batch, rbatch, pending = batch[:0], rbatch[:0], pending[:0]
		for range min(due-sent, chunk) {
			m := g.Next()
			pending = append(pending, m)
			msg := kafka.Message{Key: m.Key, Value: m.Value}
			if !unpaced {
				msg.Time = m.OccurredAt() // the record's timestamp: when it was due
			}
			if m.Topic == Refunds {
				rbatch = append(rbatch, msg)
			} else {
				batch = append(batch, msg)
			}
		}
		if !unpaced {
			st.MaxLag = max(st.MaxLag, now.Sub(start.Add(step*time.Duration(sent))))
		}
		if err := write(ctx, w, batch, rbatch); err != nil {
			if ctx.Err() != nil {
				return st, ctx.Err()
			}
			return st, fmt.Errorf("workload: hand %d messages to the writers after %d: %w", len(pending), sent, err)
		}
		for _, m := range pending {
			st.Summary.Add(m)
		}
		sent += len(pending)
		st.Elapsed = time.Since(start)
		if progress != nil {
			progress(st)
		}
	}
	return st, nil
}

// write hands the payments, then the refunds, of one hand-over to w.
func write(ctx context.Context, w Writers, payments, refunds []kafka.Message) error {
	if len(payments) > 0 {
		if err := w.Payments.WriteMessages(ctx, payments...); err != nil {
			return err
		}
	}
	if len(refunds) > 0 {
		return w.Refunds.WriteMessages(ctx, refunds...)
	}
	return nil
}

// chunk is the most messages of one hand-over.
const chunk = 1000

// minTick is the shortest sleep of a paced producer; a message waits at most
// about this long past its due time.
const minTick = time.Millisecond

// dueBy is how many messages of the schedule are due at now (step > 0, as
// Config.Validate after defaults ensures).
func dueBy(start time.Time, step time.Duration, now time.Time) int {
	if now.Before(start) {
		return 0
	}
	return int(now.Sub(start)/step) + 1
}

// sleepUntil waits until at, or until ctx ends.
func sleepUntil(ctx context.Context, at time.Time) error {
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
