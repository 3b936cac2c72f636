package bench

import (
	"hash/fnv"
	"sync/atomic"

	"github.com/quotaflow/billing/internal/event"
)

// source hands a caller its next batch; an empty batch means done.
type source interface {
	next() []event.PaymentSucceeded
}

// sharedQueue gives single events, in workload order, to whichever caller asks first.
type sharedQueue struct {
	events []event.PaymentSucceeded
	pos    *atomic.Int64
}

func (q sharedQueue) next() []event.PaymentSucceeded {
	i := int(q.pos.Add(1) - 1)
	if i >= len(q.events) {
		return nil
	}
	return q.events[i : i+1]
}

// lane is one caller's own merchants' events, in workload order, in batches.
type lane struct {
	events []event.PaymentSucceeded
	batch  int
}

func (l *lane) next() []event.PaymentSucceeded {
	n := min(l.batch, len(l.events))
	b := l.events[:n:n]
	l.events = l.events[n:]
	return b
}

// sources builds one source per caller: a shared queue of single events, or,
// for a batched strategy, lanes that partition the events by merchant.
func sources(events []event.PaymentSucceeded, callers, batch int, batched bool) []source {
	out := make([]source, callers)
	if !batched {
		q := sharedQueue{events: events, pos: new(atomic.Int64)}
		for i := range out {
			out[i] = q
		}
		return out
	}
	for i, l := range partition(events, callers) {
		out[i] = &lane{events: l, batch: batch}
	}
	return out
}

// partition splits events into n lanes by hash(merchant) % n, keeping order.
func partition(events []event.PaymentSucceeded, n int) [][]event.PaymentSucceeded {
	lanes := make([][]event.PaymentSucceeded, n)
	for _, e := range events {
		i := laneOf(e.MerchantID, n)
		lanes[i] = append(lanes[i], e)
	}
	return lanes
}

func laneOf(merchant string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(merchant))
	return int(h.Sum32() % uint32(n))
}
