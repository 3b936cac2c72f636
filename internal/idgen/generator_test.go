package idgen

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// testStart is a millisecond boundary well inside the time range.
var testStart = time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)

func newTestGenerator(t *testing.T, worker int, opts Options) *Generator {
	t.Helper()
	g, err := New(worker, opts)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func mustNext(t *testing.T, g *Generator) ID {
	t.Helper()
	id, err := g.NextID()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestNewValidates(t *testing.T) {
	fc := newFakeClock(testStart)
	tests := []struct {
		name   string
		worker int
		opts   Options
	}{
		{"worker below range", -1, Options{}},
		{"worker above range", MaxWorker + 1, Options{}},
		{"clock and lease", 1, Options{Clock: fc, Lease: &Lease{workerID: 1, clock: fc}}},
		{"lease of another worker", 1, Options{Lease: &Lease{workerID: 2, clock: fc}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.worker, tt.opts); err == nil {
				t.Fatal("New accepted it")
			}
		})
	}
	l := &Lease{workerID: 3, clock: fc}
	newTestGenerator(t, 3, Options{Lease: l})
	if _, err := New(3, Options{Lease: l}); err == nil {
		t.Fatal("second generator on one lease accepted")
	}
}

func TestNextIDLayout(t *testing.T) {
	fc := newFakeClock(testStart.Add(250 * time.Microsecond))
	g := newTestGenerator(t, 513, Options{Clock: fc})
	for seq := range 3 {
		p := decode(mustNext(t, g))
		if !p.Time.Equal(testStart) || p.Worker != 513 || p.Sequence != seq {
			t.Fatalf("ID %d decodes to %+v", seq, p)
		}
	}
	fc.Add(time.Millisecond)
	if p := decode(mustNext(t, g)); !p.Time.Equal(testStart.Add(time.Millisecond)) || p.Sequence != 0 {
		t.Fatalf("new millisecond: %+v", p)
	}
}

func TestSequenceExhaustionWaitsForNextMillisecond(t *testing.T) {
	fc := newFakeClock(testStart.Add(300 * time.Microsecond))
	m, _ := NewMetrics(nil)
	g := newTestGenerator(t, 1, Options{Clock: fc, Metrics: m})
	var last ID
	for i := range MaxSequence + 2 {
		id := mustNext(t, g)
		if id <= last {
			t.Fatalf("ID %d: %d not above %d", i, id, last)
		}
		last = id
	}
	p := decode(last)
	if !p.Time.Equal(testStart.Add(time.Millisecond)) || p.Sequence != 0 {
		t.Fatalf("4097th ID: %+v, want next millisecond, sequence 0", p)
	}
	sleeps, maxSleep, _ := fc.stats()
	if sleeps != 1 || maxSleep != 700*time.Microsecond {
		t.Fatalf("slept %d times, longest %v; want once, for the 700µs left of the millisecond", sleeps, maxSleep)
	}
	if got := counterValue(m.exhaustionWaits); got != 1 {
		t.Fatalf("exhaustion waits metric = %v", got)
	}
	if got := counterValue(m.issued); got != MaxSequence+2 {
		t.Fatalf("issued metric = %v", got)
	}
}

func TestClockBackward(t *testing.T) {
	tests := []struct {
		name     string
		back     time.Duration
		wantWait bool
	}{
		{"1ms waits", time.Millisecond, true},
		{"5ms waits", 5 * time.Millisecond, true},
		{"5ms+1ns refused", 5*time.Millisecond + 1, false},
		{"6ms refused", 6 * time.Millisecond, false},
		{"100ms refused", 100 * time.Millisecond, false},
		{"1s refused", time.Second, false},
		{"1h refused", time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := newFakeClock(testStart) // exactly on a millisecond boundary
			m, _ := NewMetrics(nil)
			g := newTestGenerator(t, 2, Options{Clock: fc, Metrics: m})
			first := mustNext(t, g)
			fc.Add(-tt.back)
			// Check foretells NextID, and neither waits nor counts.
			if err := g.Check(); tt.wantWait != (err == nil) || (err != nil && !errors.Is(err, ErrClockBackward)) {
				t.Fatalf("Check = %v", err)
			}
			id, err := g.NextID()
			sleeps, maxSleep, _ := fc.stats()
			if tt.wantWait {
				if err != nil {
					t.Fatalf("NextID: %v", err)
				}
				if sleeps != 1 || maxSleep != tt.back {
					t.Fatalf("slept %d times, %v; want once, %v", sleeps, maxSleep, tt.back)
				}
				if p := decode(id); id <= first || p.Sequence != 1 {
					t.Fatalf("after the wait: %d (%+v), first %d", id, p, first)
				}
				if counterValue(m.backwardWaited) != 1 {
					t.Fatal("wait not counted")
				}
				return
			}
			var cbe *ClockBackwardError
			if !errors.Is(err, ErrClockBackward) || !errors.As(err, &cbe) || cbe.By != tt.back {
				t.Fatalf("NextID = %d, %v; want ClockBackwardError{By: %v}", id, err, tt.back)
			}
			if sleeps != 0 {
				t.Fatalf("slept %v before refusing", maxSleep)
			}
			if counterValue(m.backwardRefused) != 1 {
				t.Fatal("refusal not counted")
			}
			// The refusal did not touch the sequence: once the clock is back,
			// the same millisecond continues at sequence 1.
			fc.Add(tt.back)
			if p := decode(mustNext(t, g)); !p.Time.Equal(testStart) || p.Sequence != 1 {
				t.Fatalf("after the clock returned: %+v", p)
			}
		})
	}
}

func TestTimeRange(t *testing.T) {
	last := time.UnixMilli(EpochUnixMilli + MaxTime).UTC()
	tests := []struct {
		name    string
		at      time.Time
		wantErr error
	}{
		{"epoch", epoch(), nil},
		{"last millisecond", last.Add(999 * time.Microsecond), nil},
		{"bits exhausted", last.Add(time.Millisecond), ErrTimeExhausted},
		{"far future", time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), ErrTimeExhausted},
		{"before epoch", epoch().Add(-time.Nanosecond), ErrClockBeforeEpoch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newTestGenerator(t, MaxWorker, Options{Clock: newFakeClock(tt.at)})
			id, err := g.NextID()
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("NextID = %d, %v; want %v", id, err, tt.wantErr)
			}
			if err == nil && (id < 0 || !decode(id).Time.Equal(tt.at.Truncate(time.Millisecond))) {
				t.Fatalf("ID %d decodes to %+v", id, decode(id))
			}
		})
	}
}

// stuckClock never moves, not even when slept on.
type stuckClock struct{ t time.Time }

func (c stuckClock) Now() time.Time      { return c.t }
func (c stuckClock) Sleep(time.Duration) {}

func TestStalledClockIsBounded(t *testing.T) {
	g := newTestGenerator(t, 1, Options{Clock: stuckClock{testStart}})
	dst := make([]ID, MaxSequence+1)
	if err := g.NextIDs(dst); err != nil {
		t.Fatal(err)
	}
	if _, err := g.NextID(); !errors.Is(err, ErrClockStalled) {
		t.Fatalf("NextID on a stuck clock = %v, want ErrClockStalled", err)
	}
}

func TestNextIDsBatch(t *testing.T) {
	fc := newFakeClock(testStart)
	m, _ := NewMetrics(nil)
	g := newTestGenerator(t, 9, Options{Clock: fc, Metrics: m})
	if err := g.NextIDs(nil); err != nil {
		t.Fatal(err)
	}
	first := mustNext(t, g)
	dst := make([]ID, 10000)
	if err := g.NextIDs(dst); err != nil {
		t.Fatal(err)
	}
	prev := first
	for i, id := range dst {
		if id <= prev || decode(id).Worker != 9 {
			t.Fatalf("dst[%d] = %d after %d", i, id, prev)
		}
		prev = id
	}
	// 1 + 10000 IDs on a clock that moves only when slept on: 3 milliseconds,
	// the last one partly used.
	if p := decode(dst[len(dst)-1]); !p.Time.Equal(testStart.Add(2*time.Millisecond)) || p.Sequence != 10000-2*4096 {
		t.Fatalf("last of batch: %+v", p)
	}
	if sleeps, _, _ := fc.stats(); sleeps != 2 {
		t.Fatalf("batch waited %d times, want 2", sleeps)
	}
	if got := counterValue(m.issued); got != 10001 {
		t.Fatalf("issued metric = %v", got)
	}
}

// TestRandomBackwardJumps drives the clock with random backward steps of
// 1ms, 5ms, 6ms, 100ms, 1s and 1h (each corrected later) under concurrent
// use: no duplicates, each goroutine's IDs strictly increase, no wait is over
// 5ms, and only steps that would need a longer wait are refused.
func TestRandomBackwardJumps(t *testing.T) {
	fc := newFakeClock(testStart)
	fc.step = 7 * time.Microsecond
	fc.rng = rand.New(rand.NewPCG(1, 2))
	fc.jumpProb = 0.002
	fc.jumps = []time.Duration{time.Millisecond, 5 * time.Millisecond, 6 * time.Millisecond, 100 * time.Millisecond, time.Second, time.Hour}
	fc.restoreAfter = 40
	m, _ := NewMetrics(nil)
	g := newTestGenerator(t, 5, Options{Clock: fc, Metrics: m})

	const goroutines, perGoroutine = 8, 40000
	results := make([][]ID, goroutines)
	errs := make(chan error, goroutines)
	var wg sync.WaitGroup
	for w := range goroutines {
		wg.Go(func() {
			ids := make([]ID, 0, perGoroutine)
			batch := make([]ID, 1+w%3*20) // some goroutines use batches
			var prev ID
			for len(ids) < perGoroutine {
				var err error
				if len(batch) == 1 {
					batch[0], err = g.NextID()
				} else {
					err = g.NextIDs(batch)
				}
				if err != nil {
					var cbe *ClockBackwardError
					if !errors.As(err, &cbe) || cbe.By <= 5*time.Millisecond {
						errs <- err
						return
					}
					continue
				}
				for _, id := range batch {
					if id <= prev {
						t.Errorf("goroutine %d: %d after %d", w, id, prev)
						return
					}
					prev = id
				}
				ids = append(ids, batch...)
			}
			results[w] = ids
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("unexpected error: %v", err)
	}
	all := slices.Concat(results...)
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("duplicate ID %d", all[i])
		}
	}
	_, maxSleep, jumped := fc.stats()
	waited, refused := counterValue(m.backwardWaited), counterValue(m.backwardRefused)
	t.Logf("%d IDs, %d clock jumps, %v backward waits, %v refusals, longest sleep %v", len(all), jumped, waited, refused, maxSleep)
	if maxSleep > 5*time.Millisecond {
		t.Fatalf("a wait took %v, over 5ms", maxSleep)
	}
	if jumped < 50 || waited == 0 || refused == 0 {
		t.Fatalf("the test did not exercise both paths: %d jumps, %v waits, %v refusals", jumped, waited, refused)
	}
}

func TestMetricsRegister(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	g := newTestGenerator(t, 1, Options{Metrics: m})
	mustNext(t, g)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var issued float64 = -1
	for _, f := range families {
		if f.GetName() == "billing_idgen_ids_issued_total" {
			issued = f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if issued != 1 {
		t.Fatalf("billing_idgen_ids_issued_total = %v, want 1", issued)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Fatal("registering twice succeeded")
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// A call the lease refuses issues nothing, so it must leave the generator as
// if it never happened: once the cause is gone, the next call continues the
// same millisecond's sequence, without waiting and without a backward-clock
// refusal (a forward glitch used to move the newest millisecond ahead).
func TestRefusedCallLeavesNoTrace(t *testing.T) {
	base := testStart.UnixMilli() - EpochUnixMilli
	good := window{validUntil: testStart.Add(time.Second), minMs: base - 1000, maxMs: base + 1000}
	tests := []struct {
		name    string
		refuse  func(fc *fakeClock, l *Lease)
		restore func(fc *fakeClock, l *Lease)
	}{
		{"clock jumps past the deadline", func(fc *fakeClock, _ *Lease) { fc.Add(time.Hour) }, func(fc *fakeClock, _ *Lease) { fc.Add(-time.Hour) }},
		{"clock jumps past the mark", func(fc *fakeClock, l *Lease) {
			w := good
			w.validUntil = testStart.Add(time.Hour)
			l.window.Store(&w)
			fc.Add(2 * time.Second)
		}, func(fc *fakeClock, l *Lease) { fc.Add(-2 * time.Second); l.window.Store(&good) }},
		{"lease not held", func(_ *fakeClock, l *Lease) { l.window.Store(nil) }, func(_ *fakeClock, l *Lease) { l.window.Store(&good) }},
		{"before the previous holder's mark", func(_ *fakeClock, l *Lease) {
			w := good
			w.minMs = base
			l.window.Store(&w)
		}, func(_ *fakeClock, l *Lease) { l.window.Store(&good) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := newFakeClock(testStart) // does not move unless told
			lease := &Lease{workerID: 3, clock: fc}
			lease.window.Store(&good)
			g := newTestGenerator(t, 3, Options{Lease: lease})
			first := mustNext(t, g)
			tt.refuse(fc, lease)
			if err := g.Check(); !errors.Is(err, ErrLeaseNotValid) {
				t.Fatalf("Check = %v; want ErrLeaseNotValid", err)
			}
			if id, err := g.NextID(); !errors.Is(err, ErrLeaseNotValid) {
				t.Fatalf("NextID = %d, %v; want ErrLeaseNotValid", id, err)
			}
			batch := make([]ID, 3)
			if err := g.NextIDs(batch); !errors.Is(err, ErrLeaseNotValid) {
				t.Fatalf("NextIDs = %v; want ErrLeaseNotValid", err)
			}
			tt.restore(fc, lease)
			if err := g.Check(); err != nil {
				t.Fatalf("Check once the cause is gone: %v", err)
			}
			id, err := g.NextID()
			if err != nil {
				t.Fatalf("NextID once the cause is gone: %v", err)
			}
			if id != first+1 {
				t.Fatalf("NextID = %d (%+v), want %d: the refused calls moved the generator", id, decode(id), first+1)
			}
			if sleeps, _, _ := fc.stats(); sleeps != 0 {
				t.Fatalf("slept %d times", sleeps)
			}
		})
	}
}

func TestInt64s(t *testing.T) {
	g := newTestGenerator(t, 4, Options{Clock: newFakeClock(testStart)})
	first := mustNext(t, g)
	dst := make([]int64, 5000)
	if err := (Int64s{g}).NextIDs(dst); err != nil {
		t.Fatal(err)
	}
	prev := int64(first)
	for i, id := range dst {
		if id <= prev || decode(ID(id)).Worker != 4 {
			t.Fatalf("dst[%d] = %d after %d", i, id, prev)
		}
		prev = id
	}
}

// reservingClock is a clock under which another caller reserves an ID later
// than the reading it just handed out: a NextID that runs while the caller
// is preempted between its clock read and whatever it does next.
type reservingClock struct {
	*fakeClock
	g       *Generator
	armed   bool
	reentry bool
}

func (c *reservingClock) Now() time.Time {
	now := c.fakeClock.Now()
	if c.armed && !c.reentry {
		c.armed, c.reentry = false, true
		c.fakeClock.Add(20 * time.Millisecond)
		if _, err := c.g.NextID(); err != nil {
			panic(err)
		}
		c.reentry = false
	}
	return now
}

// Check, like NextID, reads the state before the clock: an ID reserved by
// another caller between the two is no backward step. (Read the other way
// round, a probe preempted for more than 5ms while the lanes issue would
// report a clock refusal that never was.)
func TestCheckReadsStateBeforeClock(t *testing.T) {
	c := &reservingClock{fakeClock: newFakeClock(testStart)}
	g := newTestGenerator(t, 4, Options{Clock: c})
	c.g = g
	mustNext(t, g)
	c.armed = true
	if err := g.Check(); err != nil {
		t.Fatalf("Check with an ID reserved concurrently, the clock never set back: %v", err)
	}
}
