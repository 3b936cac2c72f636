package consumer

import (
	"strconv"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/segmentio/kafka-go"
)

// envelope is a message on its way through a lane.
type envelope[T any] struct {
	msg   kafka.Message
	value T
	err   error // decode error: dead-letter it
	part  *partition

	attempts    int // failures alone
	first, last time.Time
}

// fail counts a failure of the message.
func (e *envelope[T]) fail() {
	e.last = time.Now()
	if e.attempts++; e.first.IsZero() {
		e.first = e.last
	}
}

// lane handles the messages of its keys one batch at a time, in order. Its
// buffers are reused from batch to batch.
type lane[T any] struct {
	id    int
	key   string // health key
	in    chan envelope[T]
	batch []envelope[T]
	items []Item[T]
	bo    *backoff.ExponentialBackOff
}

func newLane[T any](id int, cfg Config) *lane[T] {
	return &lane[T]{id: id, key: "lane/" + strconv.Itoa(id), in: make(chan envelope[T], cfg.BatchSize),
		batch: make([]envelope[T], 0, cfg.BatchSize), items: make([]Item[T], 0, cfg.BatchSize), bo: newBackoff(cfg)}
}

// runLane collects batches and settles each before taking the next, until
// the generation stops. A batch takes what is queued, up to BatchSize; a lane
// that was idle waits up to BatchWait once the first message is there, for
// more to come. A lane that was busy does not wait: what queued meanwhile has
// waited a batch's time already. Messages still queued when the generation
// stops are dropped: their offsets stay uncommitted.
func (g *generation[T]) runLane(l *lane[T]) {
	defer g.c.health.ok(l.key)
	var timer *time.Timer
	if g.c.cfg.BatchWait > 0 {
		timer = time.NewTimer(g.c.cfg.BatchWait)
		defer timer.Stop()
	}
	for {
		idle := len(l.in) == 0
		select {
		case e := <-l.in:
			l.batch = append(l.batch[:0], e)
		case <-g.stop.Done():
			return
		}
		wait := timer
		if !idle {
			wait = nil
		}
		if !g.fill(l, wait) {
			return
		}
		g.settle(l)
		clear(l.batch) // let the messages go
	}
}

// fill adds messages to the batch up to BatchSize: those already queued, and
// with a timer those arriving within BatchWait. It returns false when the
// generation stopped.
func (g *generation[T]) fill(l *lane[T], timer *time.Timer) bool {
	size := g.c.cfg.BatchSize
	if timer == nil {
		for len(l.batch) < size {
			select {
			case e := <-l.in:
				l.batch = append(l.batch, e)
			default:
				return g.stop.Err() == nil
			}
		}
		return g.stop.Err() == nil
	}
	timer.Reset(g.c.cfg.BatchWait)
	defer timer.Stop()
	for len(l.batch) < size {
		select {
		case e := <-l.in:
			l.batch = append(l.batch, e)
		case <-timer.C:
			return g.stop.Err() == nil
		case <-g.stop.Done():
			return false
		}
	}
	return g.stop.Err() == nil
}
