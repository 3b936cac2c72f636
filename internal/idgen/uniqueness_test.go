package idgen

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// seenSet records IDs of one worker as bits, a 512-byte page per
// millisecond, so 64 M IDs need about 8 MB instead of 512 MB.
type seenSet struct {
	baseMs int64
	pages  []atomic.Pointer[[64]atomic.Uint64]
}

func newSeenSet(from time.Time, span time.Duration) *seenSet {
	return &seenSet{
		baseMs: from.UnixMilli() - EpochUnixMilli,
		pages:  make([]atomic.Pointer[[64]atomic.Uint64], span.Milliseconds()),
	}
}

// add reports whether id is new; ok is false when it is outside the span.
func (s *seenSet) add(id ID) (fresh, ok bool) {
	off := int64(id)>>timeShift - s.baseMs
	if off < 0 || off >= int64(len(s.pages)) {
		return false, false
	}
	page := s.pages[off].Load()
	if page == nil {
		page = new([64]atomic.Uint64)
		if !s.pages[off].CompareAndSwap(nil, page) {
			page = s.pages[off].Load()
		}
	}
	seq := int64(id) & MaxSequence
	bit := uint64(1) << (seq & 63)
	return page[seq>>6].Or(bit)&bit == 0, true
}

// TestUniqueAcrossGoroutines: 64 goroutines share one generator on the real
// clock; every ID is unique and each goroutine's IDs strictly increase. Half
// the goroutines take IDs one by one, half in batches of 100. Without -race
// each goroutine takes 1 M IDs (64 M, at least 16s at the 4.096 M/s cap);
// under -race 1 M in total.
func TestUniqueAcrossGoroutines(t *testing.T) {
	const goroutines = 64
	perGoroutine := 1_000_000
	if raceEnabled {
		perGoroutine = 1_000_000 / goroutines
	}
	g := newTestGenerator(t, 77, Options{})
	start := time.Now()
	seen := newSeenSet(start.Add(-time.Second), 15*time.Minute)
	var dups, outside atomic.Int64
	var wg sync.WaitGroup
	for w := range goroutines {
		wg.Go(func() {
			batch := make([]ID, 1)
			if w%2 == 1 {
				batch = make([]ID, 100)
			}
			var prev ID
			for done := 0; done < perGoroutine; done += len(batch) {
				if len(batch) > perGoroutine-done {
					batch = batch[:perGoroutine-done]
				}
				var err error
				if len(batch) == 1 {
					batch[0], err = g.NextID()
				} else {
					err = g.NextIDs(batch)
				}
				if err != nil {
					t.Errorf("goroutine %d: %v", w, err)
					return
				}
				for _, id := range batch {
					if id <= prev {
						t.Errorf("goroutine %d: %d after %d", w, id, prev)
						return
					}
					prev = id
					fresh, ok := seen.add(id)
					if !ok {
						outside.Add(1)
					} else if !fresh {
						dups.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	total := goroutines * perGoroutine
	t.Logf("%d IDs from %d goroutines in %v: %.2f M/s (race=%v)", total, goroutines, elapsed.Round(time.Millisecond),
		float64(total)/elapsed.Seconds()/1e6, raceEnabled)
	if n := dups.Load(); n != 0 {
		t.Fatalf("%d duplicate IDs", n)
	}
	if n := outside.Load(); n != 0 {
		t.Fatalf("%d IDs outside the run's time span", n)
	}
}
