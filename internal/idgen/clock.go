package idgen

import (
	"runtime"
	"time"
)

// Clock is the generator's and the lease's source of time, injectable for tests.
type Clock interface {
	Now() time.Time
	Sleep(d time.Duration) // only short waits, never while holding state
}

// SystemClock is the real clock.
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Sleep parks for all but the last millisecond and spins for the rest: a timer
// may overshoot by a millisecond, which on sequence exhaustion would waste
// most of the next millisecond's 4096 IDs.
func (systemClock) Sleep(d time.Duration) {
	start := time.Now()
	if d > 2*time.Millisecond {
		time.Sleep(d - time.Millisecond)
	}
	for time.Since(start) < d {
		runtime.Gosched()
	}
}
