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

// The shards of one key take consecutive lanes: with as many lanes as
// shards, each shard has a lane of its own, and shard 0 is the key's lane.
func TestRouteSpreadsShardsOverLanes(t *testing.T) {
	for _, tc := range []struct{ lanes, shards, distinct int }{
		{4, 1, 1}, {4, 4, 4}, {4, 8, 4}, {8, 3, 3}, {1, 8, 1},
	} {
		seen := map[int]bool{}
		for s := range tc.shards {
			l := Route{Key: "m-hot", Shard: s}.lane(tc.lanes)
			if l < 0 || l >= tc.lanes {
				t.Fatalf("lane %d of %d", l, tc.lanes)
			}
			seen[l] = true
		}
		if len(seen) != tc.distinct {
			t.Errorf("%d shards over %d lanes: %d distinct lanes, want %d", tc.shards, tc.lanes, len(seen), tc.distinct)
		}
		if got, want := (Route{Key: "m-hot"}).lane(tc.lanes), int(fnv32("m-hot")%uint32(tc.lanes)); got != want {
			t.Errorf("shard 0 in lane %d, want the key's lane %d", got, want)
		}
	}
}
