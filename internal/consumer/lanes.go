package consumer

import (
	"strconv"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/segmentio/kafka-go"
)

// envelope is a message on its way through a lane.
type envelope[T any] struct {
	msg     kafka.Message
	value   T
	err     error // decode error: dead-letter it
	part    *partition
	fetched time.Time // the latency budget counts from here

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
	// handling is a moving average of the lane's recent batches' time from
	// the end of gathering to settled: the part of the budget not to hold.
	handling time.Duration
}

func newLane[T any](id int, cfg Config) *lane[T] {
	return &lane[T]{id: id, key: "lane/" + strconv.Itoa(id), in: make(chan envelope[T], cfg.BatchSize),
		batch: make([]envelope[T], 0, cfg.BatchSize), items: make([]Item[T], 0, cfg.BatchSize), bo: newBackoff(cfg)}
}

// runLane gathers batches and settles each before taking the next, until
// the generation stops. Messages still queued when the generation stops are
// dropped: their offsets stay uncommitted.
func (g *generation[T]) runLane(l *lane[T]) {
	defer g.c.health.ok(l.key)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case e := <-l.in:
			l.batch = append(l.batch[:0], e)
		case <-g.stop.Done():
			return
		}
		if !g.gather(l, timer) {
			return
		}
		began := time.Now()
		g.settle(l)
		l.handled(time.Since(began), g.c.cfg.LatencyBudget)
		clear(l.batch) // let the messages go
	}
}

// gather adds messages to the batch up to BatchSize: those already queued,
// then those arriving while the batch's oldest message is within its hold
// (see hold). It returns false when the generation stopped.
func (g *generation[T]) gather(l *lane[T], timer *time.Timer) bool {
	size := g.c.cfg.BatchSize
	d := hold(l.batch[0].fetched, time.Now(), g.c.cfg.LatencyBudget, l.handling)
	if d <= 0 {
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
	timer.Reset(d)
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

// hold is how much longer a batch that is not full waits for more messages:
// until its oldest message, fetched at oldest, has spent the budget less the
// time handling a batch takes (handling); not at all once it has, as at a
// backlog, where messages wait in the lane while it handles the previous
// batch. Waiting fills batches at a low rate: each pays the handler's round
// trips and a commit, whatever its size.
func hold(oldest, now time.Time, budget, handling time.Duration) time.Duration {
	if budget <= handling {
		return 0
	}
	return max(oldest.Add(budget-handling).Sub(now), 0)
}

// handled folds a batch's handling time d into the lane's moving average (an
// eighth of the new time), d capped at the budget: a batch that retried for
// long must not stop the lane holding for long after.
func (l *lane[T]) handled(d, budget time.Duration) {
	d = min(d, budget)
	l.handling += (d - l.handling) / 8
}
