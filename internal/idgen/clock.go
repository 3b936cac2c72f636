package idgen

import (
	"runtime"
	"time"
)

// Clock is the generator's source of time, injectable for tests.
type Clock interface {
	Now() time.Time
	// Sleep blocks for d. The generator calls it only for short waits (the
	// rest of a millisecond, a small backward step), never while holding state.
	Sleep(d time.Duration)
}

// SystemClock is the real clock.
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// spinBelow is the wait under which Sleep spins instead of parking on a timer:
// a timer sleep may overshoot by up to a millisecond, which on sequence
// exhaustion would throw away most of the next millisecond's 4096 IDs.
const spinBelow = 2 * time.Millisecond

// Sleep parks for all but the last millisecond of long waits and spins,
// yielding the processor, for the rest.
func (systemClock) Sleep(d time.Duration) {
	start := time.Now()
	if d > spinBelow {
		time.Sleep(d - time.Millisecond)
	}
	for time.Since(start) < d {
		runtime.Gosched()
	}
}
