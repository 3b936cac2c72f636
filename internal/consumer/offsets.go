package consumer

import (
	"errors"
	"fmt"
	"slices"
)

// errOffsetOrder marks an offset that does not follow the last one admitted.
var errOffsetOrder = errors.New("consumer: offset out of order")

// window is one partition's bookkeeping between fetch and commit: the fetched
// offsets in order (compaction leaves gaps), bounded, and which are done. Its
// position, where the group resumes, is the oldest unfinished offset, or one
// past the last done one: never past an unfinished message. Not safe for
// concurrent use.
type window struct {
	offs []int64 // admitted and not yet released, increasing
	done []bool
	cap  int
	next int64 // position when offs is empty; -1 while unknown
}

// newWindow returns a window for capacity in-flight offsets. start is the
// committed offset the partition resumes from, or negative when none is
// known yet (then the first admitted offset fixes it).
func newWindow(capacity int, start int64) *window {
	return &window{cap: capacity, next: max(start, -1)}
}

// admit records a fetched offset. It returns false, and records nothing,
// when the window is full.
func (w *window) admit(off int64) (bool, error) {
	last := w.next - 1
	if n := len(w.offs); n > 0 {
		last = w.offs[n-1]
	}
	if off <= last || off < 0 {
		return false, fmt.Errorf("%w: %d after %d", errOffsetOrder, off, last)
	}
	if len(w.offs) == w.cap {
		return false, nil
	}
	w.offs, w.done = append(w.offs, off), append(w.done, false)
	return true, nil
}

// markDone marks off done and releases the done entries at the front. It
// returns how many entries were released. An offset the window does not hold
// (already released, or never admitted) changes nothing.
func (w *window) markDone(off int64) int {
	i, ok := slices.BinarySearch(w.offs, off)
	if !ok {
		return 0
	}
	w.done[i] = true
	freed := 0
	for freed < len(w.done) && w.done[freed] {
		freed++
	}
	if freed > 0 {
		w.next = w.offs[freed-1] + 1
		w.offs, w.done = w.offs[freed:], w.done[freed:]
	}
	return freed
}

// position returns the commit position and whether it is known.
func (w *window) position() (int64, bool) {
	if len(w.offs) > 0 {
		return w.offs[0], true
	}
	return w.next, w.next >= 0
}

// len returns the number of offsets admitted and not yet released.
func (w *window) len() int { return len(w.offs) }
