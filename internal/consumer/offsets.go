package consumer

import (
	"errors"
	"fmt"
)

// errOffsetOrder marks an offset that does not follow the last one admitted.
var errOffsetOrder = errors.New("consumer: offset out of order")

// window is one partition's bookkeeping between fetch and commit: the fetched
// offsets in order, bounded, and which of them are done. Offsets need not be
// contiguous (compaction and transaction markers leave gaps), so the window
// keeps the offsets themselves rather than a base and a bitmap.
//
// Its position is the offset the group resumes from: the oldest unfinished
// offset, or one past the last done offset when nothing is unfinished. It
// never passes an unfinished message. Not safe for concurrent use.
type window struct {
	offs []int64 // ring of admitted offsets, increasing from head
	done []bool
	head int
	n    int
	next int64 // position when the ring is empty; -1 while unknown
}

// newWindow returns a window for capacity in-flight offsets. start is the
// committed offset the partition resumes from, or negative when none is
// known yet (then the first admitted offset fixes it).
func newWindow(capacity int, start int64) *window {
	if start < 0 {
		start = -1
	}
	return &window{offs: make([]int64, capacity), done: make([]bool, capacity), next: start}
}

// admit records a fetched offset. It returns false, and records nothing,
// when the window is full.
func (w *window) admit(off int64) (bool, error) {
	if last, ok := w.last(); (ok && off <= last) || (!ok && w.next >= 0 && off < w.next) || off < 0 {
		return false, fmt.Errorf("%w: %d after %d", errOffsetOrder, off, max(last, w.next-1))
	}
	if w.n == len(w.offs) {
		return false, nil
	}
	i := (w.head + w.n) % len(w.offs)
	w.offs[i], w.done[i] = off, false
	w.n++
	return true, nil
}

// markDone marks off done and releases the done entries at the front. It
// returns how many entries were released. An offset the window does not hold
// (already released, or never admitted) changes nothing.
func (w *window) markDone(off int64) int {
	k, ok := w.find(off)
	if !ok {
		return 0
	}
	w.done[(w.head+k)%len(w.offs)] = true
	freed := 0
	for w.n > 0 && w.done[w.head] {
		w.next = w.offs[w.head] + 1
		w.head = (w.head + 1) % len(w.offs)
		w.n--
		freed++
	}
	return freed
}

// position returns the commit position and whether it is known.
func (w *window) position() (int64, bool) {
	if w.n > 0 {
		return w.offs[w.head], true
	}
	return w.next, w.next >= 0
}

// len returns the number of offsets admitted and not yet released.
func (w *window) len() int { return w.n }

func (w *window) last() (int64, bool) {
	if w.n == 0 {
		return -1, false
	}
	return w.offs[(w.head+w.n-1)%len(w.offs)], true
}

// find binary-searches the ring for off and returns its distance from head.
func (w *window) find(off int64) (int, bool) {
	lo, hi := 0, w.n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if w.offs[(w.head+mid)%len(w.offs)] < off {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, lo < w.n && w.offs[(w.head+lo)%len(w.offs)] == off
}
