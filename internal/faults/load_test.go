package faults

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/invariant"
	"github.com/quotaflow/billing/internal/scenario"
	"github.com/quotaflow/billing/internal/workload"
)

// load produces messages at a steady rate from a goroutine of its own, so
// faults can be injected while events flow.
type load struct {
	msgs []kafka.Message
	sent atomic.Int64
	quit chan struct{}
	done chan struct{}
	err  error
	// released, when set, holds the last chunk until release: whatever runs
	// meanwhile runs while the load is still producing.
	released    chan struct{}
	releaseOnce sync.Once
	held        atomic.Bool // waiting for release
}

// startLoad produces msgs in order, about rate per second, until all are
// sent, Stop is called or ctx ends. wait returns the first error.
func (g *rig) startLoad(ctx context.Context, msgs []kafka.Message, rate int) *load {
	return g.produceAtRate(ctx, msgs, rate, false)
}

// startHeldLoad is startLoad whose last chunk waits for release, so that an
// operation racing the load (a resharding, a replayed fault) cannot outlast it
// on a slow machine.
func (g *rig) startHeldLoad(ctx context.Context, msgs []kafka.Message, rate int) *load {
	return g.produceAtRate(ctx, msgs, rate, true)
}

// release lets a held load write its last chunk. A load that is not held
// ignores it, as do all calls after the first.
func (l *load) release() {
	if l.released != nil {
		l.releaseOnce.Do(func() { close(l.released) })
	}
}

// holding reports whether a held load has written all but its last chunk and
// waits for release.
func (l *load) holding() bool { return l.held.Load() }

func (g *rig) produceAtRate(ctx context.Context, msgs []kafka.Message, rate int, held bool) *load {
	return g.produceAtRateTo(ctx, g.topic, msgs, rate, held)
}

// produceAtRateTo is produceAtRate to another topic.
func (g *rig) produceAtRateTo(ctx context.Context, topic string, msgs []kafka.Message, rate int, held bool) *load {
	l := &load{msgs: msgs, quit: make(chan struct{}), done: make(chan struct{})}
	if held {
		l.released = make(chan struct{})
	}
	w := g.writer(topic)
	go func() {
		defer close(l.done)
		defer w.Close()
		const tick = 50 * time.Millisecond
		chunk := max(1, rate*int(tick/time.Millisecond)/1000)
		next := time.Now()
		for i := 0; i < len(msgs); i += chunk {
			if l.released != nil && i+chunk >= len(msgs) {
				l.held.Store(true)
				select {
				case <-l.released:
					l.held.Store(false)
				case <-ctx.Done():
					l.err = ctx.Err()
					return
				case <-l.quit:
					return
				}
			}
			part := msgs[i:min(i+chunk, len(msgs))]
			if err := w.WriteMessages(ctx, part...); err != nil {
				l.err = fmt.Errorf("faults: produce at message %d: %w", i, err)
				return
			}
			l.sent.Add(int64(len(part)))
			next = next.Add(tick)
			select {
			case <-ctx.Done():
				if i+chunk < len(msgs) {
					l.err = ctx.Err()
				}
				return
			case <-l.quit:
				return
			case <-time.After(time.Until(next)):
			}
		}
	}()
	return l
}

// Stop ends the load after the chunk being written, and waits for it.
func (l *load) Stop() error {
	close(l.quit)
	return l.wait()
}

// produced is what the load has written: all of it once it ended by itself.
func (l *load) produced() []kafka.Message { return l.msgs[:l.sent.Load()] }

// wait lets a held load write its last chunk (what had to run under the load
// is over) and blocks until the load has ended.
func (l *load) wait() error {
	l.release()
	<-l.done
	return l.err
}

// running reports whether messages are still being produced.
func (l *load) running() bool {
	select {
	case <-l.done:
		return false
	default:
		return true
	}
}

func (g *rig) writer(topic string) *kafka.Writer {
	return &kafka.Writer{Addr: kafka.TCP(g.kafka.Brokers...), Topic: topic, Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: 2 * time.Millisecond, Transport: g.transport}
}

// produce writes msgs at once.
func (g *rig) produce(ctx context.Context, msgs []kafka.Message) {
	g.t.Helper()
	g.produceTo(ctx, g.topic, msgs)
}

// produceTo writes msgs to topic at once.
func (g *rig) produceTo(ctx context.Context, topic string, msgs []kafka.Message) {
	g.t.Helper()
	w := g.writer(topic)
	defer w.Close()
	if err := scenario.Produce(ctx, w, msgs, nil); err != nil {
		g.t.Fatal(err)
	}
}

// traffic builds a seeded stream and its truth.
func traffic(t *testing.T, seed uint64, cfg workload.Config, n, conflicts int) scenario.Traffic {
	t.Helper()
	cfg.Seed = seed
	tr, err := scenario.BuildTraffic(cfg, n, conflicts)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// truth is what was produced, for the checker, grown as messages are re-sent.
type truth struct {
	produced invariant.Produced
	first    map[string]event.PaymentSucceeded
}

// truthOf classifies msgs from scratch (a prefix of a traffic, say).
func truthOf(msgs []kafka.Message) *truth {
	t := &truth{first: map[string]event.PaymentSucceeded{}}
	for _, m := range msgs {
		t.add(m)
	}
	return t
}

func newTruth(tr scenario.Traffic) *truth {
	t := &truth{produced: invariant.Produced{Valid: append([]event.PaymentSucceeded(nil), tr.Produced.Valid...), Invalid: tr.Produced.Invalid},
		first: map[string]event.PaymentSucceeded{}}
	for _, e := range t.produced.Valid {
		if _, ok := t.first[e.EventID]; !ok {
			t.first[e.EventID] = e
		}
	}
	return t
}

// add records one more produced message, classified as the worker will: a
// message event.Decode refuses, or an event_id seen with another merchant or
// amount, must be dead-lettered; anything else must leave its ledger row.
func (t *truth) add(m kafka.Message) {
	e, err := event.Decode(m.Key, m.Value)
	if err != nil {
		t.produced.Invalid++
		return
	}
	if f, ok := t.first[e.EventID]; ok && (f.MerchantID != e.MerchantID || f.Amount != e.Amount) {
		t.produced.Invalid++
		return
	}
	if _, ok := t.first[e.EventID]; !ok {
		t.first[e.EventID] = e
	}
	t.produced.Valid = append(t.produced.Valid, e)
}

// isEvent reports whether m is one of the truth's events (not poison, not a conflict).
func (t *truth) isEvent(m kafka.Message) bool {
	e, err := event.Decode(m.Key, m.Value)
	if err != nil {
		return false
	}
	f, ok := t.first[e.EventID]
	return ok && f.MerchantID == e.MerchantID && f.Amount == e.Amount
}
