package consumer

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A consumer stopped mid-stream commits only handled work; a second one in the
// same group picks up from there and finishes: every message handled at least
// once, every key's first deliveries in order.
func TestRestartMidStream(t *testing.T) {
	c := newCluster(t)
	const parts, n = 3, 1500
	topic, dlqTopic := c.k.Topic(t, parts), c.k.Topic(t, 1)
	msgs, perKey := events(n, 40)
	c.produce(t, topic, msgs)
	first, _ := c.offsets(t, topic, parts)

	rec := newRecorder()
	cfg := c.config(topic, dlqTopic)
	cfg.BatchSize = 8
	a := start(t, cfg, rec.handler(3*time.Millisecond), nil)
	waitFor(t, 10*time.Second, "some messages handled", func() bool { return rec.distinct() >= 300 })
	a.stop(t)
	handled := rec.distinct()
	if handled >= n {
		t.Fatalf("first consumer finished everything (%d); the test needs a slower handler", handled)
	}
	committed := c.committed(t, cfg.Group, topic, parts)
	if err := rec.unhandledBelow(committed, first); err != nil {
		t.Fatal(err)
	}
	var sum int64
	for p, off := range committed {
		sum += max(off-first[p], 0)
	}
	if sum == 0 {
		t.Fatalf("nothing committed on shutdown after %d handled", handled)
	}
	t.Logf("first consumer: %d handled, %d committed at shutdown", handled, sum)

	start(t, cfg, rec.handler(0), nil)
	waitFor(t, 15*time.Second, "all handled", func() bool { return rec.distinct() == n })
	c.waitCommittedEnd(t, cfg.Group, topic, parts)
	rec.checkOrder(t, perKey)
}

// A second member joins mid-stream and later leaves: two rebalances. At every
// moment the committed offsets never pass an unhandled message, and in the end
// everything is handled and committed.
func TestRebalanceNeverCommitsUnhandled(t *testing.T) {
	c := newCluster(t)
	const parts, n = 4, 3000
	topic, dlqTopic := c.k.Topic(t, parts), c.k.Topic(t, 1)
	msgs, perKey := events(n, 60)
	c.produce(t, topic, msgs)
	first, _ := c.offsets(t, topic, parts)

	rec := newRecorder()
	cfg := c.config(topic, dlqTopic)
	cfg.BatchSize = 8

	// Watch the invariant while the group changes.
	stopWatch := make(chan struct{})
	var watch sync.WaitGroup
	var checks atomic.Int64
	watch.Add(1)
	go func() {
		defer watch.Done()
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(25 * time.Millisecond):
			}
			committed, err := c.committedErr(cfg.Group, topic, parts)
			if err == nil {
				err = rec.unhandledBelow(committed, first)
			}
			if err != nil {
				t.Error(err)
				return
			}
			checks.Add(1)
		}
	}()
	defer func() {
		close(stopWatch)
		watch.Wait()
	}()

	var bHandled atomic.Int64
	h := rec.handler(2 * time.Millisecond)
	a := start(t, cfg, h, nil)
	waitFor(t, 10*time.Second, "first member handling", func() bool { return rec.distinct() >= 300 })
	b := start(t, cfg, handlerFunc(func(ctx context.Context, items []Item[event]) ([]error, error) {
		errs, err := h(ctx, items)
		bHandled.Add(int64(len(items)))
		return errs, err
	}), nil)
	waitFor(t, 10*time.Second, "second member handling", func() bool { return bHandled.Load() >= 200 })
	if rec.distinct() >= n {
		t.Fatal("everything handled before the second member took part; slow the handler down")
	}
	took := b.stop(t)
	t.Logf("second member left after %d handled, its Run returned in %v", rec.distinct(), took)
	waitFor(t, 15*time.Second, "all handled", func() bool { return rec.distinct() == n })
	c.waitCommittedEnd(t, cfg.Group, topic, parts)
	a.stop(t)
	if got := value(t, a.m.generations); got < 3 {
		t.Errorf("first member saw %v generations, want >= 3 (join, rebalance in, rebalance out)", got)
	}
	rec.checkOrder(t, perKey)
	t.Logf("invariant checked %d times", checks.Load())
}

// A member whose handler call outlives the revoke drain abandons it: the
// message is not committed by the old generation nor by the next one, so the
// partition's next owner handles it again.
func TestRevokedWorkIsNotCommitted(t *testing.T) {
	c := newCluster(t)
	const parts, n = 2, 400
	topic, dlqTopic := c.k.Topic(t, parts), c.k.Topic(t, 1)
	msgs, _ := events(n, 10)
	c.produce(t, topic, msgs)
	first, _ := c.offsets(t, topic, parts)

	rec := newRecorder()
	h := newStuckHandler(rec, "k-3:5")
	released := false
	defer func() {
		if !released {
			close(h.release)
		}
	}()
	cfg := c.config(topic, dlqTopic)
	a := start(t, cfg, h, nil)
	var stuck Item[event]
	select {
	case stuck = <-h.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("stuck message never reached the handler")
	}
	gens := value(t, a.m.generations)
	start(t, cfg, rec.handler(0), nil)
	// The first member rejoins once its drain gave up on the stuck call.
	waitFor(t, 10*time.Second, "first member in a new generation", func() bool { return value(t, a.m.generations) > gens })
	close(h.release)
	released = true
	waitFor(t, 15*time.Second, "all handled", func() bool { return rec.distinct() == n })
	c.waitCommittedEnd(t, cfg.Group, topic, parts)
	if err := rec.unhandledBelow(c.committed(t, cfg.Group, topic, parts), first); err != nil {
		t.Fatal(err)
	}
	if got := rec.times(stuck.Msg.Partition, stuck.Msg.Offset); got < 2 {
		t.Errorf("abandoned message handled %d times, want a redelivery", got)
	}
}
