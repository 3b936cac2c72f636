package consumer

import (
	"slices"
	"strconv"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/segmentio/kafka-go"

	"github.com/quotaflow/billing/internal/failure"
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
	// join takes another lane's invitation while this one holds a batch,
	// back the joint call's outcome for the batch once it joined: see collect.
	join chan *joint[T]
	back chan *outcome
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
		join: make(chan *joint[T]), back: make(chan *outcome, 1), last: time.Now()} // the first message's gap counts from here
}

// joint is one lane's invitation to another's held batch to join its own
// for the first handler call.
type joint[T any] struct {
	room int                // messages the batch still takes
	give chan []envelope[T] // a joining lane's batch; nil: it does not fit
}

// share is a joined lane's part of a joint batch: its n messages, after
// the collecting lane's own and those of the lanes that joined before.
type share[T any] struct {
	l *lane[T]
	n int
}

// gathered is how gathering a batch ended.
type gathered int

const (
	own     gathered = iota // the lane settles its batch
	joined                  // another lane's batch took it: its outcome comes on back
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
			// No wait on stop: the collecting lane sends the outcome as soon
			// as its call returns, and only this lane marks its messages done.
			g.settle(l, <-l.back)
		case own:
			began := time.Now()
			if shares := g.collect(l); len(shares) > 0 {
				g.settleJoint(l, shares)
			} else {
				g.settle(l, nil)
			}
			l.handled(time.Since(began), g.c.cfg.LatencyBudget)
		}
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
			if len(l.batch) > j.room || !decoded(l.batch) {
				j.give <- nil
				continue
			}
			j.give <- l.batch
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
// long as each fits, and returns the lanes that joined: at a low rate the
// lanes' batches go to the handler as one, paying its round trips once (see
// settleJoint). Only batches whose messages all decoded go jointly: a lane
// dead-letters its own.
func (g *generation[T]) collect(l *lane[T]) []share[T] {
	size := g.c.cfg.BatchSize
	if len(l.batch) >= size || !decoded(l.batch) {
		return nil
	}
	var shares []share[T]
	var j *joint[T]
	for _, o := range g.lanes {
		if o == l || len(l.batch) >= size {
			continue
		}
		if j == nil {
			j = &joint[T]{give: make(chan []envelope[T], 1)}
		}
		j.room = size - len(l.batch)
		select {
		case o.join <- j: // o is holding a batch: it answers at once
			if b := <-j.give; b != nil {
				l.batch = append(l.batch, b...)
				shares = append(shares, share[T]{o, len(b)})
			}
		default:
		}
	}
	return shares
}

// settleJoint makes the joint batch's first handler call, sends each joined
// lane the outcome for its messages and settles the lane's own. Only that
// call is shared: each lane retries its own failures, with its own backoff
// and attempt counts, so one's failures never hold another, and a lane
// whose messages all succeeded goes on at once, its order kept.
func (g *generation[T]) settleJoint(l *lane[T], shares []share[T]) {
	ctx, span := g.startBatch(l)
	g.c.m.batchSize.Observe(float64(len(l.batch)))
	errs, err := g.call(ctx, l, l.batch)
	span.End()
	part := func(at, n int) *outcome {
		switch {
		case err != nil && !failure.IsOutage(err):
			return nil // any lane's message may have caused it: each calls again with its own
		case err != nil:
			return &outcome{err: err}
		case len(errs) == 0:
			return &outcome{}
		}
		return &outcome{errs: errs[at : at+n]}
	}
	n := len(l.batch)
	for _, s := range shares {
		n -= s.n
	}
	at := n
	for _, s := range shares {
		s.l.back <- part(at, s.n)
		at += s.n
	}
	clear(l.batch[n:]) // the joined lanes' copies
	l.batch = l.batch[:n]
	g.settle(l, part(0, n))
}

// decoded reports whether every message of batch decoded.
func decoded[T any](batch []envelope[T]) bool {
	return !slices.ContainsFunc(batch, func(e envelope[T]) bool { return e.err != nil })
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
