package lock

import (
	"math/rand/v2"
	"time"
)

// backoff yields capped exponential delays with jitter: each delay is drawn
// from [d/2, d] where d doubles from min up to max. The jitter spreads waiters
// that were woken together; the random half keeps them from polling in step.
type backoff struct {
	min, max time.Duration
	next     time.Duration
}

func (b *backoff) delay() time.Duration {
	d := max(b.next, b.min)
	b.next = min(2*d, b.max)
	d = min(d, b.max)
	half := d / 2
	return half + rand.N(d-half+1)
}

func (b *backoff) reset() { b.next = 0 }
