package consumer

import (
	"context"
	"testing"
	"time"
)

// A lane waits BatchWait only when it was idle: messages that queued while
// it handled a batch go in the next one at once, however long BatchWait is.
func TestBusyLaneDoesNotWait(t *testing.T) {
	c := newCluster(t)
	topic, dlqTopic := c.k.Topic(t, 1), c.k.Topic(t, 1)
	cfg := c.config(topic, dlqTopic)
	cfg.Lanes, cfg.BatchSize, cfg.BatchWait = 1, 4, time.Hour

	release := make(chan struct{})
	calls := make(chan int, 10)
	first := true // the lane's goroutine alone calls the handler
	handler := handlerFunc(func(ctx context.Context, items []Item[event]) ([]error, error) {
		calls <- len(items)
		if first {
			first = false
			<-release // the first batch holds the lane while more messages queue
		}
		return nil, nil
	})
	m, err := NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := New(cfg, decodeEvent, handler, nil, testLogger(t), m)
	if err != nil {
		t.Fatal(err)
	}
	msgs, _ := events(6, 1)
	c.produce(t, topic, msgs[:4]) // a full batch: no wait for it either
	r := run(t, cons, m)
	select {
	case n := <-calls:
		if n != 4 {
			t.Fatalf("first batch of %d, want 4", n)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no first batch")
	}
	c.produce(t, topic, msgs[4:])
	waitFor(t, 15*time.Second, "the two messages fetched", func() bool { return value(t, r.m.consumed) == 6 })
	close(release)
	select {
	case n := <-calls:
		if n != 2 {
			t.Errorf("second batch of %d, want the 2 queued", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the busy lane waited for BatchWait (an hour) instead of taking what queued")
	}
	r.stop(t)
}
