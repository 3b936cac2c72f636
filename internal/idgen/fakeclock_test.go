package idgen

import (
	"math/rand/v2"
	"sync"
	"time"
)

// fakeClock is a Clock for tests: Now advances by step per call, Sleep
// advances by the slept duration and records it, and with jumpProb per Now
// call the clock steps back by one of jumps, then (restoreAfter calls later)
// forward again, like an NTP step and its correction.
type fakeClock struct {
	mu       sync.Mutex
	now      time.Time
	step     time.Duration
	sleeps   int
	maxSleep time.Duration

	rng          *rand.Rand
	jumpProb     float64
	jumps        []time.Duration
	restoreAfter int
	behind       time.Duration
	restoreIn    int
	jumped       int
}

func newFakeClock(at time.Time) *fakeClock { return &fakeClock{now: at} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rng != nil {
		switch {
		case c.behind > 0:
			if c.restoreIn--; c.restoreIn <= 0 {
				c.now = c.now.Add(c.behind)
				c.behind = 0
			}
		case c.rng.Float64() < c.jumpProb:
			c.behind = c.jumps[c.rng.IntN(len(c.jumps))]
			c.now = c.now.Add(-c.behind)
			c.restoreIn = 1 + c.rng.IntN(c.restoreAfter)
			c.jumped++
		}
	}
	c.now = c.now.Add(c.step)
	return c.now
}

func (c *fakeClock) Sleep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps++
	c.maxSleep = max(c.maxSleep, d)
	c.now = c.now.Add(d)
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func (c *fakeClock) stats() (sleeps int, maxSleep time.Duration, jumped int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sleeps, c.maxSleep, c.jumped
}

// offsetClock is the real clock shifted by a fixed offset: a host whose clock
// is set ahead (or, negative, back).
type offsetClock struct{ offset time.Duration }

func (c offsetClock) Now() time.Time        { return time.Now().Add(c.offset) }
func (c offsetClock) Sleep(d time.Duration) { SystemClock().Sleep(d) }
