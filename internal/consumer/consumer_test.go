package consumer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// N messages over many keys and partitions: each handled exactly once, each
// key in order, offsets committed to the end, nothing dead-lettered.
func TestConsumeInOrderAndCommit(t *testing.T) {
	for _, wait := range []time.Duration{0, 2 * time.Millisecond} {
		t.Run("latency budget "+wait.String(), func(t *testing.T) { testConsumeInOrderAndCommit(t, wait) })
	}
}

func testConsumeInOrderAndCommit(t *testing.T, budget time.Duration) {
	c := newCluster(t)
	const parts, n, keys = 4, 3000, 50
	topic, dlqTopic := c.k.Topic(t, parts), c.k.Topic(t, 1)
	msgs, perKey := events(n, keys)
	c.produce(t, topic, msgs)

	rec := newRecorder()
	cfg := c.config(topic, dlqTopic)
	cfg.LatencyBudget = budget
	m, err := NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := New(cfg, decodeEvent, rec.handler(0), nil, testLogger(t), m)
	if err != nil {
		t.Fatal(err)
	}
	if err := cons.Ready(context.Background()); !errors.Is(err, ErrJoining) {
		t.Errorf("Ready before Run = %v, want ErrJoining", err)
	}
	r := run(t, cons, m)
	waitFor(t, 15*time.Second, "all messages handled", func() bool { return rec.distinct() == n })
	c.waitCommittedEnd(t, cfg.Group, topic, parts)
	waitFor(t, 5*time.Second, "ready", func() bool { return r.c.Ready(context.Background()) == nil })
	waitFor(t, 5*time.Second, "lag gauges at zero", func() bool {
		for p := 0; p < parts; p++ {
			if value(t, r.m.lag.WithLabelValues(itoa(p))) != 0 {
				return false
			}
		}
		return true
	})
	if took := r.stop(t); took > cfg.ShutdownTimeout {
		t.Errorf("Run returned %v after cancel, bound %v", took, cfg.ShutdownTimeout)
	}

	for p, offs := range rec.handled {
		for off, times := range offs {
			if times != 1 {
				t.Errorf("partition %d offset %d handled %d times", p, off, times)
			}
		}
	}
	rec.checkOrder(t, perKey)
	if got := value(t, r.m.consumed); got != n {
		t.Errorf("consumed counter = %v, want %d", got, n)
	}
	if got := value(t, r.m.batchSize); got == 0 || got == n {
		t.Errorf("%v batches for %d messages: not batched", got, n)
	}
	if _, end := c.offsets(t, dlqTopic, 1); end[0] != 0 {
		t.Errorf("%d records dead-lettered, want none", end[0])
	}
	if err := r.c.Ready(context.Background()); !errors.Is(err, ErrStopped) {
		t.Errorf("Ready after Run = %v, want ErrStopped", err)
	}
	if err := r.c.Run(context.Background()); !errors.Is(err, ErrAlreadyRun) {
		t.Errorf("second Run = %v, want ErrAlreadyRun", err)
	}
}

// With no broker to reach, Ready names the group failure and Run still
// returns promptly when cancelled.
func TestUnreachableBrokers(t *testing.T) {
	cfg := Config{Brokers: []string{"127.0.0.1:1"}, Topic: "t", Group: "g", DLQTopic: "t.dlq",
		JoinGroupBackoff: 50 * time.Millisecond, ShutdownTimeout: 2 * time.Second,
		SessionTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond}
	r := start(t, cfg, handlerFunc(func(context.Context, []Item[event]) ([]error, error) { return nil, nil }), nil)
	waitFor(t, 10*time.Second, "group failure reported", func() bool {
		err := r.c.Ready(context.Background())
		return err != nil && strings.Contains(err.Error(), "consumer: group g: ") && strings.Contains(err.Error(), "retrying since")
	})
	if took := r.stop(t); took > cfg.ShutdownTimeout {
		t.Errorf("Run returned %v after cancel, bound %v", took, cfg.ShutdownTimeout)
	}
}
