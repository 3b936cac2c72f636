package idgen

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Defaults of Options.
const (
	DefaultMaxBackwardWait = 5 * time.Millisecond
	DefaultMaxWait         = time.Second
)

// Options tunes a Generator. The zero value is usable (no lease: tests, tools).
type Options struct {
	// Clock defaults to SystemClock. With a Lease it must be nil: the
	// generator then uses the lease's clock, because it compares the clock
	// with the lease's deadline.
	Clock Clock
	// Metrics may be nil (counted, not registered).
	Metrics *Metrics
	// MaxBackwardWait is how far back the clock may step and be waited out
	// (default 5ms); further back is an immediate *ClockBackwardError.
	MaxBackwardWait time.Duration
	// MaxWait bounds the total waiting of one call (backward steps and
	// sequence exhaustion together, default 1s): a clock that does not move
	// for that long is broken, and the call fails with ErrClockStalled.
	MaxWait time.Duration
	// Lease gates issuance: with it, the generator issues only while the
	// lease is valid and only timestamps the lease covers. Production sets it.
	Lease *Lease
}

// Generator issues Snowflake IDs for one worker ID. It is safe for
// concurrent use.
//
// There is no mutex: the newest issued (millisecond, sequence) pair is one
// atomic word, and a call reserves its IDs with one compare-and-swap (a batch
// reserves up to the rest of the millisecond at once). So nothing is ever held
// while waiting, and a goroutine preempted mid-call cannot stall the others.
type Generator struct {
	state    atomic.Int64 // newest reserved millisecond << SequenceBits | its last sequence
	worker   int64        // worker ID << workerShift
	workerID int
	clock    Clock
	lease    *Lease
	m        *Metrics
	maxBack  time.Duration
	maxWait  time.Duration
}

// New returns a generator for workerID (0..MaxWorker).
func New(workerID int, opts Options) (*Generator, error) {
	if workerID < 0 || workerID > MaxWorker {
		return nil, fmt.Errorf("idgen: worker ID %d outside 0..%d", workerID, MaxWorker)
	}
	g := &Generator{
		worker:   int64(workerID) << workerShift,
		workerID: workerID,
		clock:    opts.Clock,
		lease:    opts.Lease,
		m:        opts.Metrics,
		maxBack:  opts.MaxBackwardWait,
		maxWait:  opts.MaxWait,
	}
	if g.maxBack == 0 {
		g.maxBack = DefaultMaxBackwardWait
	}
	if g.maxWait == 0 {
		g.maxWait = DefaultMaxWait
	}
	if g.maxBack < 0 || g.maxWait < 0 {
		return nil, errors.New("idgen: negative MaxBackwardWait or MaxWait")
	}
	if g.m == nil {
		g.m = unregisteredMetrics()
	}
	if g.lease != nil {
		if g.clock != nil {
			return nil, errors.New("idgen: Options.Clock must be nil with a Lease (the lease's clock is used)")
		}
		if g.lease.workerID != workerID {
			return nil, fmt.Errorf("idgen: lease is for worker %d, generator for %d", g.lease.workerID, workerID)
		}
		if !g.lease.gen.CompareAndSwap(nil, g) {
			return nil, fmt.Errorf("idgen: lease for worker %d already has a generator", workerID)
		}
		g.clock = g.lease.clock
	}
	if g.clock == nil {
		g.clock = SystemClock()
	}
	return g, nil
}

// WorkerID is the worker ID in every ID this generator issues.
func (g *Generator) WorkerID() int { return g.workerID }

// NextID returns a new ID, greater than every ID this generator returned
// before. It does not allocate.
func (g *Generator) NextID() (ID, error) {
	ms, seq, _, err := g.reserve(1)
	if err != nil {
		return 0, err
	}
	g.m.issued.Inc()
	return ID(ms<<timeShift | g.worker | seq), nil
}

// NextIDs fills dst with new, strictly increasing IDs, with one
// compare-and-swap per millisecond the batch spans (a batch of up to 4096
// usually takes one). Ledger batch inserts call it. On error dst is partly
// filled with valid IDs; treat the batch as failed.
func (g *Generator) NextIDs(dst []ID) error {
	for len(dst) > 0 {
		ms, seq, n, err := g.reserve(len(dst))
		if err != nil {
			return err
		}
		first := ID(ms<<timeShift | g.worker | seq)
		for i := range n {
			dst[i] = first + ID(i)
		}
		dst = dst[n:]
		g.m.issued.Add(float64(n))
	}
	return nil
}

// reserve claims up to want consecutive sequence numbers of one millisecond.
// The clock and the lease are checked before the sequence is touched; waits
// happen outside any critical section (there is none) and count against
// MaxWait.
func (g *Generator) reserve(want int) (ms, seq int64, n int, err error) {
	var waited time.Duration
	for {
		old := g.state.Load()
		// Read the clock after the state: any state we saw was made from a
		// reading no later than ours, so a smaller ms is a real backward step.
		now := g.clock.Now()
		ms, err = millis(now)
		if err != nil {
			return 0, 0, 0, err
		}
		lastMs, lastSeq := old>>SequenceBits, old&MaxSequence
		switch {
		case ms < lastMs:
			behind := time.Duration(epochUnixNano + lastMs*int64(time.Millisecond) - now.UnixNano())
			if behind > g.maxBack {
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
		// A refused call issues nothing, so it must not move the state: a
		// clock glitch past the lease would otherwise leave the generator
		// refusing for the glitch's length after the clock came back.
		w, refused := g.checkLease(now, ms)
		if refused != nil {
			return 0, 0, 0, refused
		}
		n64 := min(int64(want), MaxSequence+1-seq)
		next := ms<<SequenceBits | (seq + n64 - 1)
		if !g.state.CompareAndSwap(old, next) {
			continue
		}
		// Release first invalidates the window, then reads the state: a
		// window still in place after the compare-and-swap means Release
		// sees this reservation (see Lease.releaseLocked). A changed window
		// is checked again, and a refusal undone unless a later call has
		// already built on it.
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
	waited += d
	if waited > g.maxWait {
		return waited, fmt.Errorf("%w: one call would wait %v (limit %v)", ErrClockStalled, waited, g.maxWait)
	}
	g.clock.Sleep(d)
	return waited, nil
}

// checkLease is one atomic load and a few comparisons: no Redis round trip
// per ID. Renewal keeps the window fresh in the background (Lease.Run). It
// returns the window it checked.
func (g *Generator) checkLease(now time.Time, ms int64) (*window, error) {
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
	g.m.leaseRefusals.Inc()
	return w, fmt.Errorf("%w: worker %d: %s", ErrLeaseNotValid, g.workerID, why)
}

// lastMs is the newest millisecond reserved (or -1 if none).
func (g *Generator) lastMs() int64 {
	s := g.state.Load()
	if s == 0 {
		return -1
	}
	return s >> SequenceBits
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

// fmtMs formats milliseconds since the epoch.
func fmtMs(ms int64) string {
	return time.UnixMilli(EpochUnixMilli + ms).UTC().Format(time.RFC3339Nano)
}
