package consumer

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// While a dependency is down (probe failing, handler failing) nothing is
// dead-lettered or committed, fetch stops at the in-flight window, and Ready
// names the dependency; once it is back everything is handled and committed.
func TestOutageRetriesWithoutDeadLetters(t *testing.T) {
	c := newCluster(t)
	const parts, n = 3, 600
	topic, dlqTopic := c.k.Topic(t, parts), c.k.Topic(t, 1)
	msgs, perKey := events(n, 30)
	c.produce(t, topic, msgs)

	var down atomic.Bool
	down.Store(true)
	rec := newRecorder()
	ok := rec.handler(0)
	h := handlerFunc(func(ctx context.Context, items []Item[event]) ([]error, error) {
		if down.Load() {
			if len(items) > 1 {
				return nil, errors.New("redis: connection refused")
			}
			return []error{errors.New("redis: connection refused")}, nil
		}
		return ok(ctx, items)
	})
	probe := func(context.Context) error {
		if down.Load() {
			return errors.New("redis: dial tcp 127.0.0.1:6379: connect: connection refused")
		}
		return nil
	}
	cfg := c.config(topic, dlqTopic)
	cfg.MaxInFlightPerPartition = 32
	r := start(t, cfg, h, probe)

	// Long enough for many more failures than MaxAttempts.
	waitFor(t, 10*time.Second, "outage retries", func() bool { return value(t, r.m.retries.WithLabelValues(retryOutage)) >= 40 })
	err := r.c.Ready(context.Background())
	if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "retrying since") {
		t.Fatalf("Ready during outage = %v", err)
	}
	if _, end := c.offsets(t, dlqTopic, 1); end[0] != 0 {
		t.Fatalf("%d records dead-lettered during an outage", end[0])
	}
	for p, off := range c.committed(t, cfg.Group, topic, parts) {
		if off > 0 {
			t.Fatalf("partition %d committed %d during an outage with nothing handled", p, off)
		}
	}
	// Backpressure: each partition stops fetching at its window (+1 waiting).
	if got, most := value(t, r.m.consumed), float64(parts*(cfg.MaxInFlightPerPartition+1)); got > most {
		t.Errorf("fetched %v messages during the outage, window allows %v", got, most)
	}
	if got := value(t, r.m.retries.WithLabelValues(retryItem)); got != 0 {
		t.Errorf("%v attempts counted during an outage", got)
	}

	down.Store(false)
	waitFor(t, 15*time.Second, "all handled after recovery", func() bool { return rec.distinct() == n })
	c.waitCommittedEnd(t, cfg.Group, topic, parts)
	waitFor(t, 5*time.Second, "ready after recovery", func() bool { return r.c.Ready(context.Background()) == nil })
	r.stop(t)
	rec.checkOrder(t, perKey)
	if _, end := c.offsets(t, dlqTopic, 1); end[0] != 0 {
		t.Errorf("%d records dead-lettered", end[0])
	}
}
