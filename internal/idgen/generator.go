package idgen

import (
	"cmp"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
)

const (
	maxBackwardWait = 5 * time.Millisecond // a clock further back is refused at once
	maxWait         = time.Second          // all waits of one call: longer means a broken clock
)

// Options tunes a Generator. The zero value is usable (no lease: tests, tools).
type Options struct {
	// Clock defaults to SystemClock; with a Lease it must be nil (the lease's
	// clock is used, since the generator compares it with the lease's deadline).
	Clock   Clock
	Metrics *Metrics // nil: counted, not registered
	// Lease gates issuance: only while it is valid and only timestamps it
	// covers. Production sets it.
	Lease *Lease
}

// Generator issues Snowflake IDs for one worker ID, safe for concurrent use.
// The newest issued (millisecond, sequence) is one atomic word and a call
// reserves its IDs with one compare-and-swap, so nothing is held while waiting.
type Generator struct {
	state    atomic.Int64 // newest reserved millisecond << SequenceBits | its last sequence
	worker   int64        // worker ID << workerShift
	workerID int
	clock    Clock
	lease    *Lease
	m        *Metrics
}

// New returns a generator for workerID (0..MaxWorker).
func New(workerID int, opts Options) (*Generator, error) {
	if workerID < 0 || workerID > MaxWorker {
		return nil, fmt.Errorf("idgen: worker ID %d outside 0..%d", workerID, MaxWorker)
	}
	g := &Generator{worker: int64(workerID) << workerShift, workerID: workerID, clock: opts.Clock, lease: opts.Lease, m: opts.Metrics}
	if g.m == nil {
		g.m, _ = NewMetrics(nil)
	}
	if l := g.lease; l != nil {
		switch {
		case g.clock != nil:
			return nil, errors.New("idgen: Options.Clock must be nil with a Lease (the lease's clock is used)")
		case l.workerID != workerID:
			return nil, fmt.Errorf("idgen: lease is for worker %d, generator for %d", l.workerID, workerID)
		case !l.gen.CompareAndSwap(nil, g):
			return nil, fmt.Errorf("idgen: lease for worker %d already has a generator", workerID)
		}
		g.clock = l.clock
	}
	g.clock = cmp.Or(g.clock, SystemClock())
	return g, nil
}

// NextID returns a new ID, greater than every ID this generator returned before.
func (g *Generator) NextID() (ID, error) {
	ms, seq, _, err := g.reserve(1)
	if err != nil {
		return 0, err
	}
	g.m.issued.Inc()
	return ID(ms<<timeShift | g.worker | seq), nil
}

// NextIDs fills dst with new, strictly increasing IDs, one compare-and-swap
// per millisecond the batch spans. On error dst is partly filled: treat the
// batch as failed.
func (g *Generator) NextIDs(dst []ID) error { return nextIDs(g, dst) }

// Int64s is the generator as a source of plain int64 IDs (a ledgerdb.IDSource).
type Int64s struct{ *Generator }

// NextIDs is Generator.NextIDs into int64s.
func (s Int64s) NextIDs(dst []int64) error { return nextIDs(s.Generator, dst) }

func nextIDs[T ~int64](g *Generator, dst []T) error {
	for len(dst) > 0 {
		ms, seq, n, err := g.reserve(len(dst))
		if err != nil {
			return err
		}
		first := T(ms<<timeShift | g.worker | seq)
		for i := range n {
			dst[i] = first + T(i)
		}
		dst = dst[n:]
		g.m.issued.Add(float64(n))
	}
	return nil
}

// reserve claims up to want consecutive sequence numbers of one millisecond.
// The clock and the lease are checked before the state moves.
func (g *Generator) reserve(want int) (ms, seq int64, n int, err error) {
	var waited time.Duration
	for {
		old := g.state.Load()
		// Read the clock after the state: any state we saw was made from a
		// reading no later than ours, so a smaller ms is a real backward step.
		now := g.clock.Now()
		if ms, err = millis(now); err != nil {
			return 0, 0, 0, err
		}
		lastMs, lastSeq := old>>SequenceBits, old&MaxSequence
		switch {
		case ms < lastMs:
			behind := time.Duration(epochUnixNano + lastMs*int64(time.Millisecond) - now.UnixNano())
			if behind > maxBackwardWait {
				g.m.backwardRefused.Inc()
				return 0, 0, 0, &ClockBackwardError{By: behind}
			}
			g.m.backwardWaited.Inc()
			if waited, err = g.wait(behind, waited); err != nil {
				return 0, 0, 0, err
			}
			continue
		case ms == lastMs && lastSeq == MaxSequence:
			g.m.exhaustionWaits.Inc()
			next := time.Duration(epochUnixNano + (lastMs+1)*int64(time.Millisecond) - now.UnixNano())
			if waited, err = g.wait(next, waited); err != nil {
				return 0, 0, 0, err
			}
			continue
		case ms == lastMs:
			seq = lastSeq + 1
		default:
			seq = 0
		}
		// A refused call must not move the state: a clock glitch past the
		// lease would otherwise leave the generator refusing after it passed.
		w, refused := g.checkLease(now, ms)
		if refused != nil {
			return 0, 0, 0, refused
		}
		n64 := min(int64(want), MaxSequence+1-seq)
		next := ms<<SequenceBits | (seq + n64 - 1)
		if !g.state.CompareAndSwap(old, next) {
			continue
		}
		// Release invalidates the window before reading the state, so a window
		// unchanged after the swap means Release sees this reservation. A
		// changed one is checked again, and a refusal undone unless a later
		// call already built on it.
		if g.lease != nil && g.lease.window.Load() != w {
			if _, refused := g.checkLease(now, ms); refused != nil {
				g.state.CompareAndSwap(next, old)
				return 0, 0, 0, refused
			}
		}
		return ms, seq, int(n64), nil
	}
}

func (g *Generator) wait(d, waited time.Duration) (time.Duration, error) {
	if waited += d; waited > maxWait {
		return waited, fmt.Errorf("%w: one call would wait %v (limit %v)", ErrClockStalled, waited, maxWait)
	}
	g.clock.Sleep(d)
	return waited, nil
}

// checkLease is one atomic load, no Redis round trip; it returns the window it checked.
func (g *Generator) checkLease(now time.Time, ms int64) (*window, error) {
	w, err := g.leaseRefusal(now, ms)
	if err != nil {
		g.m.leaseRefusals.Inc()
	}
	return w, err
}

func (g *Generator) leaseRefusal(now time.Time, ms int64) (*window, error) {
	if g.lease == nil {
		return nil, nil
	}
	w := g.lease.window.Load()
	var why string
	switch {
	case w == nil:
		why = "not held"
	case !now.Before(w.validUntil):
		why = "not renewed in time, expired at " + w.validUntil.UTC().Format(time.RFC3339Nano)
	case ms <= w.minMs:
		why = "clock not yet past the previous holder's high-water mark " + fmtMs(w.minMs)
	case ms > w.maxMs:
		why = "clock past the high-water mark the lease covers " + fmtMs(w.maxMs)
	default:
		return w, nil
	}
	return w, fmt.Errorf("%w: worker %d: %s", ErrLeaseNotValid, g.workerID, why)
}

// Check returns the refusal NextID would meet now, or nil, without reserving
// an ID or counting a refusal: the probe of a caller that steps aside while
// the generator refuses. A clock behind by no more than NextID waits out, or
// an exhausted millisecond, is no refusal.
func (g *Generator) Check() error {
	last := g.lastMs() // before the clock, as in reserve
	now := g.clock.Now()
	ms, err := millis(now)
	if err != nil {
		return err
	}
	if ms < last {
		behind := time.Duration(epochUnixNano + last*int64(time.Millisecond) - now.UnixNano())
		if behind > maxBackwardWait {
			return &ClockBackwardError{By: behind}
		}
		ms = last // NextID would wait until then
	}
	_, err = g.leaseRefusal(now, ms)
	return err
}

// lastMs is the newest millisecond reserved (or -1 if none).
func (g *Generator) lastMs() int64 {
	if s := g.state.Load(); s != 0 {
		return s >> SequenceBits
	}
	return -1
}

// millis is now in milliseconds since the epoch, within the 41 time bits.
func millis(now time.Time) (int64, error) {
	ms := now.UnixMilli() - EpochUnixMilli
	switch {
	case ms < 0:
		return 0, fmt.Errorf("%w: %s", ErrClockBeforeEpoch, now.UTC().Format(time.RFC3339Nano))
	case ms > MaxTime:
		return 0, fmt.Errorf("%w: %s", ErrTimeExhausted, now.UTC().Format(time.RFC3339Nano))
	}
	return ms, nil
}

func fmtMs(ms int64) string {
	return time.UnixMilli(EpochUnixMilli + ms).UTC().Format(time.RFC3339Nano)
}

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
