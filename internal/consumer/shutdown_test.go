package consumer

import (
	"context"
	"sync"
	"testing"
	"time"
)

// stuckHandler records items, except that the first delivery of value stuck
// blocks, ignoring its context, until release is closed.
type stuckHandler struct {
	rec     *recorder
	stuck   string
	entered chan Item[event] // receives the stuck item once
	release chan struct{}
	once    sync.Once
}

func newStuckHandler(rec *recorder, stuck string) *stuckHandler {
	return &stuckHandler{rec: rec, stuck: stuck, entered: make(chan Item[event], 1), release: make(chan struct{})}
}

func (h *stuckHandler) HandleBatch(ctx context.Context, items []Item[event]) ([]error, error) {
	for _, it := range items {
		if string(it.Msg.Value) == h.stuck {
			block := false
			h.once.Do(func() { block = true })
			if block {
				h.entered <- it
				<-h.release
			}
		}
		h.rec.record(it)
	}
	return nil, nil
}

// Run returns within ShutdownTimeout even when a handler call never returns;
// that call's message and everything after it in its partition stay
// uncommitted.
func TestShutdownBoundedWithStuckHandler(t *testing.T) {
	c := newCluster(t)
	const parts = 2
	topic, dlqTopic := c.k.Topic(t, parts), c.k.Topic(t, 1)
	msgs, _ := events(200, 10)
	c.produce(t, topic, msgs)
	first, _ := c.offsets(t, topic, parts)

	rec := newRecorder()
	h := newStuckHandler(rec, "k-3:5")
	defer close(h.release) // lets the abandoned call end before the leak check
	cfg := c.config(topic, dlqTopic)
	cfg.ShutdownTimeout = 2 * time.Second
	r := start(t, cfg, h, nil)

	var stuck Item[event]
	select {
	case stuck = <-h.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("stuck message never reached the handler")
	}
	time.Sleep(3 * cfg.CommitInterval) // let the periodic commits run into the stuck offset
	took := r.stop(t)
	t.Logf("Run returned %v after cancel with a stuck handler (bound %v)", took, cfg.ShutdownTimeout)
	if took > cfg.ShutdownTimeout {
		t.Errorf("Run took %v, bound %v", took, cfg.ShutdownTimeout)
	}
	committed := c.committed(t, cfg.Group, topic, parts)
	if got := committed[stuck.Msg.Partition]; got > stuck.Msg.Offset {
		t.Errorf("partition %d committed %d past the abandoned offset %d", stuck.Msg.Partition, got, stuck.Msg.Offset)
	}
	if err := rec.unhandledBelow(committed, first); err != nil {
		t.Error(err)
	}
}
