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
	// join takes another lane's invitation while this one holds a batch:
	// see collect.
	join chan *joint[T]
	// handling is a moving average of the lane's recent batches' time from
	// the end of gathering to settled: the part of the budget not to hold.
	handling time.Duration
	// gap is a moving average of the time between the lane's messages
	// (their fetches; last is the latest): a hold shorter than it would
	// most likely wait for nothing.
	gap  time.Duration
	last time.Time
}

func newLane[T any](id int, cfg Config) *lane[T] {
	return &lane[T]{id: id, key: "lane/" + strconv.Itoa(id), in: make(chan envelope[T], cfg.BatchSize),
		batch: make([]envelope[T], 0, cfg.BatchSize), items: make([]Item[T], 0, cfg.BatchSize), bo: newBackoff(cfg),
		join: make(chan *joint[T]), last: time.Now()} // the first message's gap counts from here
}

// joint is one lane's batch that others' held batches joined: they wait
// for it to be settled before taking their next, so each lane's order holds.
type joint[T any] struct {
	room int                // messages the batch still takes
	give chan []envelope[T] // a joining lane's batch; nil: it does not fit
	done chan struct{}      // closed once the batch is settled
}

// gathered is how gathering a batch ended.
type gathered int

const (
	own     gathered = iota // the lane settles its batch
	joined                  // another lane's batch took it, and is settled
	stopped                 // the generation stopped
)

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
			l.batch = l.batch[:0]
			l.add(e, g.c.cfg.LatencyBudget)
		case <-g.stop.Done():
			return
		}
		switch g.gather(l, timer) {
		case stopped:
			return
		case joined:
			continue
		}
		done := g.collect(l)
		began := time.Now()
		g.settle(l)
		l.handled(time.Since(began), g.c.cfg.LatencyBudget)
		done()
		clear(l.batch) // let the messages go
	}
}

// gather adds messages to the batch up to BatchSize: those already queued,
// then those arriving while the batch's oldest message is within its hold
// (see hold). Meanwhile the batch may join another lane's.
func (g *generation[T]) gather(l *lane[T], timer *time.Timer) gathered {
	size := g.c.cfg.BatchSize
	budget := g.c.cfg.LatencyBudget
	d := hold(l.batch[0].fetched, time.Now(), budget, l.handling, l.gap)
	if d <= 0 {
		for len(l.batch) < size {
			select {
			case e := <-l.in:
				l.add(e, budget)
			default:
				return g.ended()
			}
		}
		return g.ended()
	}
	timer.Reset(d)
	defer timer.Stop()
	for len(l.batch) < size {
		select {
		case e := <-l.in:
			l.add(e, budget)
		case j := <-l.join:
			if len(l.batch) > j.room {
				j.give <- nil
				continue
			}
			j.give <- l.batch
			select {
			case <-j.done:
			case <-g.stop.Done():
				return stopped
			}
			clear(l.batch)
			return joined
		case <-timer.C:
			return g.ended()
		case <-g.stop.Done():
			return stopped
		}
	}
	return g.ended()
}

// ended is how a gathering that did not join another batch ended.
func (g *generation[T]) ended() gathered {
	if g.stop.Err() != nil {
		return stopped
	}
	return own
}

// collect adds to a batch that is not full the batches other lanes hold, as
// long as each fits: at a low rate the lanes' batches go as one, paying the
// handler's round trips once. The returned func, called once the batch is
// settled, lets the joined lanes go on.
func (g *generation[T]) collect(l *lane[T]) (settled func()) {
	size := g.c.cfg.BatchSize
	var j *joint[T]
	for _, o := range g.lanes {
		if o == l || len(l.batch) >= size {
			continue
		}
		if j == nil {
			j = &joint[T]{give: make(chan []envelope[T], 1), done: make(chan struct{})}
		}
		j.room = size - len(l.batch)
		select {
		case o.join <- j: // o is holding a batch: it answers at once
			l.batch = append(l.batch, <-j.give...)
		default:
		}
	}
	if j == nil {
		return func() {}
	}
	return func() { close(j.done) }
}

// hold is how much longer a batch that is not full waits for more messages:
// until its oldest message, fetched at oldest, has spent the budget less the
// time handling a batch takes (handling); not at all once it has, as at a
// backlog, where messages wait in the lane while it handles the previous
// batch, nor when the lane's messages come further apart (gap) than it
// would wait, as at a trickle or after an idle spell. Waiting fills batches
// at a low rate: each pays the handler's round trips and a commit, whatever
// its size.
func hold(oldest, now time.Time, budget, handling, gap time.Duration) time.Duration {
	if budget <= handling {
		return 0
	}
	d := max(oldest.Add(budget-handling).Sub(now), 0)
	if gap > d {
		return 0
	}
	return d
}

// add appends e to the batch and folds the time since the lane's previous
// message into its gap (an eighth of the new time, capped at ten budgets so
// that an idle spell is forgotten after a few dozen messages of a burst).
func (l *lane[T]) add(e envelope[T], budget time.Duration) {
	l.batch = append(l.batch, e)
	l.gap += (min(e.fetched.Sub(l.last), 10*budget) - l.gap) / 8
	l.last = e.fetched
}

// handled folds a batch's handling time d into the lane's moving average (an
// eighth of the new time), d capped at the budget: a batch that retried for
// long must not stop the lane holding for long after.
func (l *lane[T]) handled(d, budget time.Duration) {
	d = min(d, budget)
	l.handling += (d - l.handling) / 8
}
